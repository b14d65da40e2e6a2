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

from ringleader.policy.allocator import Counts
from ringleader.policy.objective import Candidate


def _backfill(
    jobs: Sequence[Candidate], capacity: int, key: Callable[[Candidate], tuple[float, ...]]
) -> Counts:
    counts: Counts = {}
    free = capacity
    for c in sorted(jobs, key=key):
        need = c.job.requested_gpus
        if need <= free:
            counts[c.job.id] = need
            free -= need
    return counts


@dataclass(frozen=True, slots=True)
class Tiresias:
    thresholds_gpu_s: tuple[float, ...] = (3600.0, 36_000.0)
    name: str = "tiresias"
    needs_speed: bool = False

    def queue(self, c: Candidate) -> int:
        attained = c.job.attained_gpu_s
        return sum(1 for t in self.thresholds_gpu_s if attained >= t)

    def base(self, jobs: Sequence[Candidate], capacity: int) -> Counts:
        return _backfill(jobs, capacity, lambda c: (self.queue(c), c.job.submitted_at))

    def grow(self, jobs: Sequence[Candidate], counts: Counts, free: int) -> Counts:
        return dict(counts)


@dataclass(frozen=True, slots=True)
class SRTFOracle:
    name: str = "srtf-oracle"
    needs_speed: bool = True

    def base(self, jobs: Sequence[Candidate], capacity: int) -> Counts:
        def remaining(c: Candidate) -> tuple[float, ...]:
            return (c.remaining_seconds(c.job.requested_gpus), c.job.submitted_at)

        return _backfill(jobs, capacity, remaining)

    def grow(self, jobs: Sequence[Candidate], counts: Counts, free: int) -> Counts:
        return dict(counts)


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

    def _queue(self, c: Candidate) -> int:
        return sum(1 for t in self.thresholds_gpu_s if c.job.attained_gpu_s >= t)

    def _order(self, jobs: Sequence[Candidate]) -> list[Candidate]:
        """Least-attained-service queues first, FIFO within a queue (stable sort)."""
        by_arrival = sorted(jobs, key=lambda c: c.job.submitted_at)
        if not self.thresholds_gpu_s:
            return by_arrival
        return sorted(by_arrival, key=self._queue)

    def base(self, jobs: Sequence[Candidate], capacity: int) -> Counts:
        counts: Counts = {}
        free = capacity
        for c in self._order(jobs):
            need = c.job.min_gpus if c.job.elastic else c.job.requested_gpus
            if need <= free:
                counts[c.job.id] = need
                free -= need
        return counts

    def grow(self, jobs: Sequence[Candidate], counts: Counts, free: int) -> Counts:
        from ringleader.policy.allocator import _greedy

        def step(c: Candidate, w: int) -> tuple[int, float] | None:
            if 2 * w > c.job.max_gpus or c.speed is None:
                return None
            per_epoch = 1.0 / c.speed.epochs_per_second(w) - 1.0 / c.speed.epochs_per_second(2 * w)
            return w, per_epoch / w

        return _greedy(self._order(jobs), counts, free, step)
