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

import math
from collections.abc import Sequence
from dataclasses import replace

from ringleader.perf.gpu_types import (
    GAVEL_SCALES,
    TYPE_FACTORS,
    gavel_measurements,
    gavel_steps_per_s,
    gavel_type_speeds,
)
from ringleader.policy.model.views import ClusterView
from ringleader.sim.profiles import RESNET110_K40
from ringleader.sim.submitted import SimJob
from ringleader.traces.load import TraceError, TraceJob

ASSUMPTION = "resnet110-shape"
GPUS_PER_NODE = 8
TARGET_LOAD = 0.8


def gavel_table(gpu: str) -> dict[str, object]:
    """Gavel's measurements for one GPU type, keyed ``"('JOB TYPE', SCALE)"``."""
    table: dict[str, object] = gavel_measurements()[gpu]
    return table


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


def parse_type_mix(text: str) -> dict[str, float]:
    """``"v100:1,k80:2"`` as each GPU type's share of the cluster (``TraceError``)."""
    mix: dict[str, float] = {}
    for part in text.split(","):
        name, sep, weight = part.strip().partition(":")
        try:
            share = float(weight) if sep else math.nan
        except ValueError:
            share = math.nan
        if not name or not share > 0 or math.isinf(share):
            raise TraceError(
                f"--gpu-types: {part.strip()!r} is not TYPE:SHARE, e.g. v100:1,k80:1 "
                "(each type's share of the cluster's nodes)"
            )
        if name not in TYPE_FACTORS:
            raise TraceError(
                f"--gpu-types: no speeds are known for {name!r}; traces can use "
                f"{', '.join(TYPE_FACTORS)} (Gavel's measured types)"
            )
        mix[name] = mix.get(name, 0.0) + share
    return mix


def typed_cluster(gpus: int, mix: dict[str, float]) -> ClusterView:
    """About ``gpus`` GPUs in nodes of ``GPUS_PER_NODE``, split among types by ``mix``
    (largest remainder; every type at least one node)."""
    nodes = max(-(-gpus // GPUS_PER_NODE), len(mix))
    total = sum(mix.values())
    exact = {t: nodes * w / total for t, w in mix.items()}
    counts = {t: max(1, int(x)) for t, x in exact.items()}
    for t in sorted(exact, key=lambda t: exact[t] - int(exact[t]), reverse=True):
        if sum(counts.values()) >= nodes:
            break
        counts[t] += 1
    return ClusterView.typed({t: (n, GPUS_PER_NODE) for t, n in counts.items()})


def with_type_speeds(
    jobs: Sequence[SimJob], rows: Sequence[TraceJob], types: Sequence[str]
) -> list[SimJob]:
    """Each trace job's speed on each type: Gavel's measurement for its job type at the
    largest measured size up to its own, where the trace names a measured type;
    otherwise each type's typical speed (``TYPE_FACTORS``, relative to a V100)."""
    out = []
    for job, row in zip(jobs, rows, strict=True):
        speeds = None
        if row.model is not None:
            for scale in sorted((s for s in GAVEL_SCALES if s <= row.gpus), reverse=True):
                if gavel_steps_per_s(row.model, "v100", scale):
                    speeds = gavel_type_speeds(row.model, scale)
                    break
        if speeds is None:
            speeds = dict(TYPE_FACTORS)
        picked = {t: speeds.get(t, 1.0) for t in types}
        usable = tuple(t for t in types if picked[t] > 0)
        out.append(
            replace(
                job,
                type_speed=picked,
                gpu_types=usable if len(usable) < len(types) else (),
            )
        )
    return out
