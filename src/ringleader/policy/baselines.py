"""Baselines the field compares against, as allocators of the policy core.

* ``Tiresias`` — discretised two-dimensional least-attained-service (Gu et al.,
  NSDI 2019): a job's attained service is GPUs × time it has held them; jobs
  sit in priority queues by thresholds on it (default 1 and 10 GPU-hours),
  FIFO within a queue; higher queues preempt lower ones. It needs no job
  durations. Jobs get exactly what they asked for.
* ``SRTFOracle`` — shortest remaining time first, preemptive, with the true
  remaining time: an oracle no real scheduler has, labelled as such.

Both backfill: a job that does not fit is skipped and smaller ones behind it
may run, so GPUs do not idle behind a wide job.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ringleader.policy.allocator import Counts, Growth, _elastic_start, _greedy
from ringleader.policy.objective import Candidate


def _requested(c: Candidate) -> int:
    return c.job.requested_gpus


def _backfill(
    ordered: Sequence[Candidate], capacity: int, size_of: Callable[[Candidate], int] = _requested
) -> Counts:
    """Give each job, in the order given, ``size_of(job)`` GPUs if that many are still free."""
    counts: Counts = {}
    free = capacity
    for c in ordered:
        need = size_of(c)
        if need <= free:
            counts[c.job.id] = need
            free -= need
    return counts


def las_queue(c: Candidate, thresholds_gpu_s: Sequence[float]) -> int:
    """Index of the least-attained-service queue a job is in (0 = least served)."""
    return sum(1 for t in thresholds_gpu_s if c.job.attained_gpu_s >= t)


@dataclass(frozen=True, slots=True)
class Tiresias:
    thresholds_gpu_s: tuple[float, ...] = (3600.0, 36_000.0)
    name: str = "tiresias"
    needs_speed: bool = False
    needs_true_remaining: bool = False

    def base(self, jobs: Sequence[Candidate], capacity: int) -> Counts:
        key = lambda c: (las_queue(c, self.thresholds_gpu_s), c.job.submitted_at)  # noqa: E731
        return _backfill(sorted(jobs, key=key), capacity)

    def grow(self, jobs: Sequence[Candidate], counts: Counts, free: int) -> Growth:
        return Growth(dict(counts), {})


@dataclass(frozen=True, slots=True)
class SRTFOracle:
    name: str = "srtf-oracle"
    needs_speed: bool = True
    needs_true_remaining: bool = True

    def base(self, jobs: Sequence[Candidate], capacity: int) -> Counts:
        def remaining(c: Candidate) -> tuple[float, ...]:
            return (c.remaining_seconds(c.job.requested_gpus), c.job.submitted_at)

        return _backfill(sorted(jobs, key=remaining), capacity)

    def grow(self, jobs: Sequence[Candidate], counts: Counts, free: int) -> Growth:
        return Growth(dict(counts), {})


@dataclass(frozen=True, slots=True)
class LasDoubling:
    """ringleader's default: Tiresias' queues decide who runs, doubling decides how wide.

    Base: jobs in least-attained-service order (Tiresias' queues, FIFO within
    one) get their minimum, backfilling past jobs that do not fit. The
    ``ringleader`` policy uses one threshold, 10 GPU-hours: on the ITP traces it
    beat both Tiresias' two thresholds (1 and 10 GPU-hours) and plain FIFO
    order (bench/traces.py, docs/traces.md). Grow: the
    doubling heuristic, scoring each doubling by the time per epoch it saves
    per GPU — every job's remaining work counted as one epoch, because a real
    scheduler does not know how long a job will run.
    """

    thresholds_gpu_s: tuple[float, ...] = (3600.0, 36_000.0)
    name: str = "ringleader"
    needs_speed: bool = True
    needs_true_remaining: bool = False

    def _order(self, jobs: Sequence[Candidate]) -> list[Candidate]:
        """Least-attained-service queues first, FIFO within a queue (stable sort)."""
        by_arrival = sorted(jobs, key=lambda c: c.job.submitted_at)
        if not self.thresholds_gpu_s:
            return by_arrival
        return sorted(by_arrival, key=lambda c: las_queue(c, self.thresholds_gpu_s))

    def base(self, jobs: Sequence[Candidate], capacity: int) -> Counts:
        return _backfill(self._order(jobs), capacity, _elastic_start)

    def grow(self, jobs: Sequence[Candidate], counts: Counts, free: int) -> Growth:
        def step(c: Candidate, w: int) -> tuple[int, float, float] | None:
            if 2 * w > c.job.max_gpus or c.speed is None:
                return None
            return w, 1.0 / c.speed.epochs_per_second(w), 1.0 / c.speed.epochs_per_second(2 * w)

        return _greedy(self._order(jobs), counts, free, step, per_epoch=True)
