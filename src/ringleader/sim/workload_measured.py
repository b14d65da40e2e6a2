"""A workload file's measured models: profile folders read once, jobs made from them.

A measured model names a folder of measured tables (``perf.measured``); each job
of it keeps a global batch, and plays at the table's speed for the placement it
holds (``sim.tabled``), or picks its own batch by goodput where the model says
``adaptive``. Every problem is a ``WorkloadFileError`` naming the field.
"""

from __future__ import annotations

from pathlib import Path

from ringleader.perf.measured import MeasuredJob, read_measured_job
from ringleader.perf.profile_files import ProfileError
from ringleader.sim.jobs import SimJob
from ringleader.sim.tabled import TabledProfile, job_profile, spread_over
from ringleader.sim.workload_spec import JobFields, WorkloadFileError, WorkloadSpec


class Measured:
    """The measured models of one workload file, read when first used."""

    def __init__(self, spec: WorkloadSpec, folder: Path) -> None:
        self.spec = spec
        self.folder = folder
        self._models: dict[str, MeasuredJob] = {}
        self._profiles: dict[tuple[str, int, int], TabledProfile] = {}
        self._capacity = spec.cluster.view().capacity
        self._per_node = spec.cluster.gpus_per_node or 1

    def model(self, name: str) -> MeasuredJob:
        found = self._models.get(name)
        if found is None:
            spec = self.spec.measured_models[name]
            where = self.folder / spec.profile
            try:
                found = read_measured_job(
                    where, epochs=spec.epochs, max_micro_batch=spec.max_micro_batch
                )
            except ProfileError as err:
                raise WorkloadFileError(f"measured_models.{name}.profile: {err}") from None
            self._models[name] = found
        return found

    def job(self, name: str, at: float, f: JobFields, where: str) -> SimJob:
        """The job ``name`` of a measured model, submitted ``at``; ``where`` names its entry."""
        assert f.global_batch is not None  # the spec checks it
        model = self.model(f.model)
        adaptive = self.spec.measured_models[f.model].adaptive
        batch = f.global_batch
        spread = spread_over(model, batch, adaptive=adaptive)
        widest = max(f.gpus, min(f.widest(self._capacity), spread))
        key = (f.model, batch, widest)
        profile = self._profiles.get(key)
        if profile is None:
            try:
                profile = job_profile(
                    model, batch, adaptive=adaptive, max_gpus=widest, per_node=self._per_node
                )
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
