"""A workload file's measured models: profile folders read once, jobs made from them.

A measured model names a folder of measured tables (``perf.measured``); each job
of it keeps a global batch, and plays at the table's speed for the placement it
holds (``sim.tabled``), or picks its own batch by goodput where the model says
``adaptive``. A model with a table per GPU type plays each type's (``sim.typed``).
Every problem is a ``WorkloadFileError`` naming the field.
"""

from __future__ import annotations

import math
from pathlib import Path

from ringleader.perf.measured import MeasuredJob, read_measured_job
from ringleader.perf.placements import read_step_table
from ringleader.perf.profile_files import ProfileError
from ringleader.sim.submitted import SimJob
from ringleader.sim.tabled import TabledProfile, job_profile, spread_over
from ringleader.sim.workload_spec import JobFields, WorkloadFileError, WorkloadSpec


class Measured:
    """The measured models of one workload file, read when first used."""

    def __init__(self, spec: WorkloadSpec, folder: Path) -> None:
        self.spec = spec
        self.folder = folder
        self._models: dict[tuple[str, str], MeasuredJob] = {}
        self._profiles: dict[tuple[str, str, int, int], TabledProfile] = {}
        cluster = spec.cluster
        self._capacity = cluster.view().capacity
        self._per_node = {"": cluster.gpus_per_node or 1} | {
            t: n.gpus_per_node for t, n in (cluster.types or {}).items()
        }

    def model(self, name: str, gpu_type: str = "") -> MeasuredJob:
        """``name``'s measurement on ``gpu_type`` ("": its one table, ``placements.csv``)."""
        found = self._models.get((name, gpu_type))
        if found is None:
            spec = self.spec.measured_models[name]
            where = self.folder / spec.profile
            field = f"measured_models.{name}.profile"
            try:
                if gpu_type:
                    files = spec.types[gpu_type]
                    field = f"measured_models.{name}.types.{gpu_type}"
                    base = next(iter(spec.types))
                    if gpu_type == base:
                        found = read_measured_job(
                            where,
                            epochs=spec.epochs,
                            max_micro_batch=spec.max_micro_batch,
                            placements=files.placements,
                            scalability=files.scalability,
                        )
                    else:  # the gradient statistics are the model's: read them once
                        table = read_step_table(where, files.placements, files.scalability)
                        found = self.model(name, base).on(table, spec.max_micro_batch)
                else:
                    found = read_measured_job(
                        where, epochs=spec.epochs, max_micro_batch=spec.max_micro_batch
                    )
            except ProfileError as err:
                raise WorkloadFileError(f"{field}: {err}") from None
            self._models[(name, gpu_type)] = found
        return found

    def job(self, name: str, at: float, f: JobFields, where: str) -> SimJob:
        """The job ``name`` of a measured model, submitted ``at``; ``where`` names its entry."""
        assert f.global_batch is not None  # the spec checks it
        types = self.spec.allowed_types(f)
        tabled = bool(self.spec.measured_models[f.model].types)
        on = types if tabled and types else ("",)
        profiles = {t: self._profile(f, t, where) for t in on}
        profile = profiles[on[0]]
        speeds = type_speeds(profiles) if tabled else None
        return SimJob(
            id=name,
            submitted_at=at,
            profile=profile,
            max_gpus=max(f.gpus, min(self._widest(f, on[0]), max(profile.step_times))),
            min_gpus=f.min_gpus,
            requested_gpus=f.gpus,
            elastic=f.elastic,
            work_scale=f.work_scale,
            user=f.user or "",
            priority=f.priority,
            type_speed=speeds,
            type_profiles=profiles if tabled else None,
            gpu_types=types or (),
            comm_share=f.comm_share,
        )

    def _widest(self, f: JobFields, gpu_type: str) -> int:
        """The most GPUs a job of ``f`` is told of: as far as its batch spreads."""
        assert f.global_batch is not None
        model = self.model(f.model, gpu_type)
        adaptive = self.spec.measured_models[f.model].adaptive
        spread = spread_over(model, f.global_batch, adaptive=adaptive)
        return max(f.gpus, min(f.widest(self._capacity), spread))

    def _profile(self, f: JobFields, gpu_type: str, where: str) -> TabledProfile:
        """The true profile of a job of ``f`` on ``gpu_type`` (made once per kind of job)."""
        assert f.global_batch is not None
        batch, widest = f.global_batch, self._widest(f, gpu_type)
        key = (f.model, gpu_type, batch, widest)
        profile = self._profiles.get(key)
        if profile is None:
            model = self.model(f.model, gpu_type)
            adaptive = self.spec.measured_models[f.model].adaptive
            on = f" on {gpu_type}" if gpu_type else ""
            try:
                profile = job_profile(
                    model,
                    batch,
                    adaptive=adaptive,
                    max_gpus=widest,
                    per_node=self._per_node[gpu_type],
                )
            except ProfileError as err:
                raise WorkloadFileError(f"{where}.global_batch: {err}{on}") from None
            self._profiles[key] = profile
        return profile


def type_speeds(profiles: dict[str, TabledProfile]) -> dict[str, float]:
    """What a policy is told of each type: its speed over the first type's, the geometric
    mean over the sizes both tables answer at (as ``models.types`` are read). The
    simulator plays each type's table itself (``sim.typed``)."""
    first = next(iter(profiles.values())).step_times
    speeds = {}
    for t, profile in profiles.items():
        common = [g for g in profile.step_times if g in first]
        logs = [math.log(first[g] / profile.step_times[g]) for g in common]
        speeds[t] = math.exp(sum(logs) / len(logs)) if logs else 1.0
    return speeds
