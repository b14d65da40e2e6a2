"""A workload file's measured models: profile folders read once, jobs made from them.

A measured model names a folder of measured tables (``perf.measured``); each job
of it keeps a global batch, and plays at the table's speed for the placement it
holds (``sim.tabled``), or picks its own batch by goodput where the model says
``adaptive``. Every problem is a ``WorkloadFileError`` naming the field.
"""

from __future__ import annotations

from pathlib import Path

from ringleader.perf.efficiency import read_efficiency
from ringleader.perf.measured import MeasuredJob, read_measured_job
from ringleader.perf.profile_files import ProfileError
from ringleader.sim.jobs import SimJob
from ringleader.sim.tabled import TabledProfile, adaptive_profile, tabled_profile
from ringleader.sim.workload_spec import JobFields, WorkloadFileError, WorkloadSpec


class Measured:
    """The measured models of one workload file, read when first used."""

    def __init__(self, spec: WorkloadSpec, folder: Path) -> None:
        self.spec = spec
        self.folder = folder
        self._models: dict[str, MeasuredJob] = {}
        self._profiles: dict[tuple[str, int, int], TabledProfile] = {}

    def model(self, name: str) -> MeasuredJob:
        found = self._models.get(name)
        if found is None:
            spec = self.spec.measured_models[name]
            where = self.folder / spec.profile
            try:
                epochs = spec.epochs
                if epochs is None:
                    epochs = min(len(r.progress) for r in read_efficiency(where, 1).runs.values())
                found = read_measured_job(
                    where, epochs=epochs, max_micro_batch=spec.max_micro_batch
                )
            except ProfileError as err:
                raise WorkloadFileError(f"measured_models.{name}.profile: {err}") from None
            self._models[name] = found
        return found

    def job(self, name: str, at: float, f: JobFields, where: str) -> SimJob:
        """The job ``name`` of a measured model, submitted ``at``; ``where`` names its entry."""
        assert f.global_batch is not None  # the spec checks it
        model = self.model(f.model)
        capacity = self.spec.cluster.view().capacity
        per_node = self.spec.cluster.gpus_per_node or 1
        adaptive = self.spec.measured_models[f.model].adaptive
        batch = f.global_batch
        spread = model.largest_batch if adaptive else batch
        widest = max(f.gpus, min(f.widest(capacity), spread // model.min_micro_batch))
        key = (f.model, batch, widest)
        profile = self._profiles.get(key)
        if profile is None:
            build = adaptive_profile if adaptive else tabled_profile
            try:
                profile = build(model, batch, max_gpus=widest, per_node=per_node)
            except ProfileError as err:
                raise WorkloadFileError(f"{where}.global_batch: {err}") from None
            self._profiles[key] = profile
        return SimJob(
            id=name,
            submitted_at=at,
            profile=profile,
            max_gpus=max(f.gpus, min(widest, max(profile.step_times))),
            min_gpus=f.min_gpus,
            requested_gpus=f.gpus,
            elastic=f.elastic,
            work_scale=f.work_scale,
            user=f.user or "",
            priority=f.priority,
            gpu_types=tuple(f.gpu_type or ()),
        )
