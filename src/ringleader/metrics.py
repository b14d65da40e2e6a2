"""Every number a user sees about a run, computed in one place.

The simulator and the runtime both reduce a run to ``JobRecord``s and a GPU
usage timeline, and every report (CLI tables, JSON, plots, the dashboard) reads
the ``Summary`` made here, so "average JCT" means the same thing everywhere.

Definitions:

* JCT: finish − submission, for jobs that finished.
* Queueing time: first start − submission (time before the job first ran).
* Makespan: last finish − first submission.
* Utilisation: GPU-seconds given to workers / (GPUs × makespan). A worker's GPU
  counts from the moment the plan gives it, restart time included; GPUs held
  but idle (e.g. exploratory reservations) do not count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class JobRecord:
    id: str
    submitted_at: float
    started_at: float | None
    finished_at: float | None
    resizes: int = 0

    @property
    def jct(self) -> float | None:
        return None if self.finished_at is None else self.finished_at - self.submitted_at

    @property
    def queueing(self) -> float | None:
        return None if self.started_at is None else self.started_at - self.submitted_at


@dataclass(frozen=True, slots=True)
class UsagePoint:
    """From ``time`` until the next point, ``busy`` GPUs ran workers and ``held`` were taken."""

    time: float
    busy: int
    held: int
    jobs: int


@dataclass(frozen=True, slots=True)
class Summary:
    jobs: int
    finished: int
    avg_jct_s: float
    p50_jct_s: float
    p95_jct_s: float
    p99_jct_s: float
    avg_queueing_s: float
    makespan_s: float
    utilization: float
    peak_jobs: int

    def as_dict(self) -> dict[str, float | int]:
        return {name: getattr(self, name) for name in self.__slots__}


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0–100, linear interpolation); NaN for no values."""
    if not values:
        return float("nan")
    return float(np.percentile(np.asarray(values, dtype=float), q))


def busy_gpu_seconds(usage: Sequence[UsagePoint], until: float) -> float:
    total = 0.0
    nexts: list[UsagePoint | None] = [*usage[1:], None]
    for point, nxt in zip(usage, nexts, strict=True):
        end = until if nxt is None else min(nxt.time, until)
        if end > point.time:
            total += point.busy * (end - point.time)
    return total


def summarize(records: Sequence[JobRecord], usage: Sequence[UsagePoint], gpus: int) -> Summary:
    jcts = [r.jct for r in records if r.jct is not None]
    queueing = [r.queueing for r in records if r.queueing is not None]
    start = min((r.submitted_at for r in records), default=0.0)
    end = max((r.finished_at for r in records if r.finished_at is not None), default=start)
    makespan = end - start
    used = busy_gpu_seconds(usage, end)
    return Summary(
        jobs=len(records),
        finished=len(jcts),
        avg_jct_s=float(np.mean(jcts)) if jcts else float("nan"),
        p50_jct_s=percentile(jcts, 50),
        p95_jct_s=percentile(jcts, 95),
        p99_jct_s=percentile(jcts, 99),
        avg_queueing_s=float(np.mean(queueing)) if queueing else float("nan"),
        makespan_s=makespan,
        utilization=used / (gpus * makespan) if makespan > 0 and gpus > 0 else 0.0,
        peak_jobs=max((p.jobs for p in usage), default=0),
    )


def mean_ci95(values: Sequence[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95% confidence interval (Student's t)."""
    from scipy.stats import t

    data = np.asarray(values, dtype=float)
    mean = float(data.mean())
    if len(data) < 2:
        return mean, float("nan")
    half = float(t.ppf(0.975, len(data) - 1) * data.std(ddof=1) / np.sqrt(len(data)))
    return mean, half
