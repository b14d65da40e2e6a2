"""From trace rows to simulated jobs: how fast and how elastic a trace job is.

Traces say when a job came, how many GPUs it asked for and how long it ran (or
how many steps it needed); they say nothing about how it would run at other
sizes. We fill that gap with one named, documented assumption:

``resnet110-shape`` — every job scales like the ring-allreduce seed's
ResNet-110 (its NNLS step-time model over binary-blocks allreduce, and its
epochs-to-converge growing with the global batch), stretched so that at the
size it asked for it takes exactly its trace duration. Gavel trace rows give
steps instead of a duration: the duration is steps over the job type's
measured V100 throughput at that size (``throughputs/gavel_simulation_throughputs.json``).

Jobs may run on 1 GPU up to the GPUs they asked for: an elastic policy may
give fewer when that helps the cluster, never more than requested.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path

from ringleader.sim.engine import SimJob
from ringleader.sim.profiles import RESNET110_K40
from ringleader.traces.load import TraceError, TraceJob

ASSUMPTION = "resnet110-shape"
GPUS_PER_NODE = 8
TARGET_LOAD = 0.8


@lru_cache(maxsize=1)
def _gavel_all() -> dict[str, dict[str, object]]:
    path = Path(str(resources.files("ringleader") / "data" / "throughputs"))
    data: dict[str, dict[str, object]] = json.loads(
        (path / "gavel_simulation_throughputs.json").read_text()
    )
    return data


def gavel_table(gpu: str) -> dict[str, object]:
    """Gavel's measurements for one GPU type, keyed ``"('JOB TYPE', SCALE)"``."""
    return _gavel_all()[gpu]


def duration_of(job: TraceJob) -> float:
    if job.duration_s is not None:
        return job.duration_s
    if job.model is None or job.steps is None:
        raise TraceError(f"job {job.id}: neither a duration nor a model and step count")
    table = gavel_table("v100")
    sizes = [g for g in (1, 2, 4, 8) if f"('{job.model}', {g})" in table]
    if not sizes:
        raise TraceError(f"job {job.id}: no measured throughput for job type {job.model!r}")
    size = max((g for g in sizes if g <= job.gpus), default=min(sizes))
    entry = table[f"('{job.model}', {size})"]
    assert isinstance(entry, dict)
    alone = entry["null"]
    assert isinstance(alone, int | float)
    steps_per_s = float(alone) * job.gpus / size
    return job.steps / steps_per_s


def to_sim_jobs(jobs: Sequence[TraceJob]) -> list[SimJob]:
    out = []
    for job in jobs:
        duration = max(duration_of(job), 1.0)
        scale = duration / RESNET110_K40.seconds_alone(job.gpus)
        out.append(
            SimJob(
                id=job.id,
                submitted_at=job.submit_s,
                profile=RESNET110_K40,
                max_gpus=job.gpus,
                min_gpus=1,
                requested_gpus=job.gpus,
                elastic=True,
                work_scale=scale,
                kind=job.model if job.gpus == 1 else None,
            )
        )
    return out


def recommended_gpus(jobs: Sequence[TraceJob]) -> int:
    """Cluster size that the trace's demand would keep about 80% busy, in whole nodes.

    GPU-seconds requested over the span from first submission to last
    submission plus the median duration, divided by the target load; never
    smaller than the largest job.
    """
    durations = sorted(duration_of(j) for j in jobs)
    start = min(j.submit_s for j in jobs)
    end = max(j.submit_s for j in jobs) + durations[len(durations) // 2]
    demand = sum(duration_of(j) * j.gpus for j in jobs) / max(end - start, 1.0)
    gpus = max(demand / TARGET_LOAD, max(j.gpus for j in jobs))
    return int(-(-gpus // GPUS_PER_NODE) * GPUS_PER_NODE)
