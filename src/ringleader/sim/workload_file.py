"""User-written workload files: a cluster, optional job models, and jobs.

A file is YAML, validated by pydantic with unknown fields rejected, so a typo
is an error rather than a silently ignored setting. Any problem is reported as
``WorkloadFileError`` naming the file, the field path and what was expected.
See ``docs/workload-files.md`` and ``examples/workload.yaml``.
"""

from __future__ import annotations

import gc
import math
from collections import Counter
from dataclasses import replace
from pathlib import Path

from ringleader.inputs import load_yaml_model
from ringleader.perf.epochs import EpochsToConverge
from ringleader.perf.errors import ModelFitError
from ringleader.policy.model.views import JobShape
from ringleader.sim.arrivals import poisson_arrivals
from ringleader.sim.failures import Failures
from ringleader.sim.profiles import PROFILES, TrueProfile
from ringleader.sim.submitted import SimJob
from ringleader.sim.workload_measured import Measured
from ringleader.sim.workload_spec import (
    JobFields,
    ModelSpec,
    PoissonSpec,
    WorkloadFileError,
    WorkloadSpec,
)

MAX_FILE_BYTES = 256 << 20
"""A workload file as JSON: some 2.5 million jobs of five fields."""
MAX_YAML_BYTES = 32 << 20
"""As YAML: some 350,000 jobs (PyYAML's nodes for them take about 2 GB)."""


def _type_speeds(name: str, model: ModelSpec, types: tuple[str, ...]) -> dict[str, float] | None:
    """Speed on each type relative to the first: the geometric mean of the step-time
    ratios at the worker counts both were measured at."""
    if not model.types:
        return None
    speeds = {}
    for t, given in model.types.items():
        common = sorted(set(given.step_time_s) & set(model.step_time_s))
        if not common:
            raise WorkloadFileError(
                f"models.{name}.types.{t}.step_time_s: no worker count in common with "
                f"models.{name}.step_time_s ({sorted(model.step_time_s)}); measure at least one"
            )
        logs = [math.log(model.step_time_s[w] / given.step_time_s[w]) for w in common]
        speeds[t] = math.exp(sum(logs) / len(logs))
    if types:
        speeds.setdefault(types[0], 1.0)
    return speeds


def _profile(name: str, spec: ModelSpec) -> TrueProfile:
    epochs = (
        EpochsToConverge.constant(spec.epochs)
        if isinstance(spec.epochs, float | int)
        else EpochsToConverge.from_mapping(spec.epochs)
    )
    shape = JobShape(
        spec.examples_per_epoch, spec.batch_per_worker, spec.grad_bytes, spec.allreduce
    )
    return TrueProfile(name, shape, dict(spec.step_time_s), epochs)


class Workload:
    """A validated workload: the cluster, the jobs, the simulation settings."""

    def __init__(self, spec: WorkloadSpec, folder: Path = Path()) -> None:
        """``folder``: where the file is, which a measured model's relative path starts at."""
        self.spec = spec
        profiles: dict[str, TrueProfile] = dict(PROFILES)
        for name, model in spec.models.items():
            profiles[name] = _fitted(name, model)
        self.cluster = spec.cluster.view()
        capacity = self.cluster.capacity
        measured = Measured(spec, folder)
        types = spec.cluster.type_names
        speeds = {name: _type_speeds(name, m, types) for name, m in spec.models.items()}
        for kind, entries in (("jobs", spec.jobs), ("poisson", spec.poisson)):
            for i, entry in enumerate(entries):
                widest = entry.widest(capacity)
                if entry.model in spec.measured_models:
                    continue  # the batch spreads as far as its table was measured
                if entry.global_batch is not None and entry.global_batch < widest:
                    raise WorkloadFileError(
                        f"{kind}[{i}].global_batch: {entry.global_batch} examples cannot be "
                        f"shared by up to {widest} workers (max_gpus): give each at least one"
                    )
        jobs = [
            measured.job(j.name, j.submit_s, j, f"jobs[{i}]")
            if j.model in spec.measured_models
            else _sim_job(j.name, j.submit_s, j, profiles, capacity, speeds)
            for i, j in enumerate(spec.jobs)
        ]
        for n, g in enumerate(spec.poisson):
            times = poisson_arrivals(g.count, g.mean_gap_s, g.seed, g.start_s)
            jobs += [
                measured.job(name, t, g, f"poisson[{n}]")
                if g.model in spec.measured_models
                else _sim_job(name, t, g, profiles, capacity, speeds)
                for name, t in zip(_poisson_names(g), times, strict=True)
            ]
        ids = [j.id for j in jobs]
        clash = sorted(i for i, n in Counter(ids).items() if n > 1)
        if clash:
            raise WorkloadFileError(f"job names clash between 'jobs' and 'poisson': {clash[:5]}")
        self.jobs = jobs

    def failures(self) -> Failures | None:
        """Fresh failures for one run of the workload, where its file asks for them."""
        spec = self.spec.failures
        if spec is None:
            return None
        start = min((j.submitted_at for j in self.jobs), default=0.0)
        cost = _named(self.spec, "checkpoint_s")
        return spec.for_run(self.cluster, start, cost, _named(self.spec, "checkpoint_every_s"))


def _poisson_names(g: PoissonSpec) -> list[str]:
    """The names a generator gives its jobs, in order: its prefix and a padded index."""
    width = len(str(g.count - 1))
    return [f"{g.name_prefix}{i:0{width}d}" for i in range(g.count)]


def _named(spec: WorkloadSpec, field: str) -> dict[str, float]:
    """Each job's ``field`` where it is set, by job name (a generator's jobs by the names
    it gives them)."""
    out = {j.name: getattr(j, field) for j in spec.jobs if getattr(j, field)}
    for g in spec.poisson:
        value = getattr(g, field)
        if value:
            out |= dict.fromkeys(_poisson_names(g), value)
    return out


def _scaled(profiles: dict[str, TrueProfile], model: str, global_batch: int | None) -> TrueProfile:
    """``model``'s profile, strong-scaled to ``global_batch`` if given (made once per pair)."""
    if global_batch is None:
        return profiles[model]
    key = f"{model}@{global_batch}"
    if key not in profiles:
        base = profiles[model]
        shape = replace(base.shape, global_batch=global_batch)
        profiles[key] = TrueProfile(base.name, shape, base.step_times, base.epochs)
    return profiles[key]


def _fitted(name: str, model: ModelSpec) -> TrueProfile:
    """``model``'s profile, its speed model fitted now: a model no policy could use is the
    file's error, named here, not a crash in the middle of a run."""
    profile = _profile(name, model)
    try:
        profile.speed_model  # noqa: B018 - fitted (and cached) for what it may raise
    except ModelFitError as err:
        raise WorkloadFileError(
            f"models.{name}.step_time_s: these step times cannot be fitted to the speed "
            f"model ({err}); check step_time_s, batch_per_worker, examples_per_epoch and "
            "grad_bytes"
        ) from None
    return profile


def _sim_job(
    name: str,
    at: float,
    f: JobFields,
    profiles: dict[str, TrueProfile],
    capacity: int,
    speeds: dict[str, dict[str, float] | None],
) -> SimJob:
    return SimJob(
        id=name,
        submitted_at=at,
        profile=_scaled(profiles, f.model, f.global_batch),
        max_gpus=f.widest(capacity),
        min_gpus=f.min_gpus,
        requested_gpus=f.gpus,
        elastic=f.elastic,
        work_scale=f.work_scale,
        user=f.user or "",
        priority=f.priority,
        type_speed=speeds.get(f.model),
        gpu_types=tuple(f.gpu_type or ()),
        comm_share=f.comm_share,
    )


def load_workload(path: Path) -> Workload:
    """Read and validate a workload file; raises ``WorkloadFileError`` on any problem.

    The cyclic collector is paused meanwhile: a file of a million jobs makes tens of
    millions of objects, none in a cycle, and each collection of the oldest generation
    would walk all made so far (with it, such a file took twice as long).
    """
    was_on = gc.isenabled()
    gc.disable()
    try:
        return _load_workload(path)
    finally:
        if was_on:
            gc.enable()


def _load_workload(path: Path) -> Workload:
    spec = load_yaml_model(
        path,
        WorkloadSpec,
        what="workload",
        error=WorkloadFileError,
        limit=MAX_FILE_BYTES,
        yaml_limit=MAX_YAML_BYTES,
        top="'cluster' and 'jobs' or 'poisson'",
    )
    try:
        return Workload(spec, path.parent)
    except WorkloadFileError as err:
        raise WorkloadFileError(f"{path}: {err}") from None
