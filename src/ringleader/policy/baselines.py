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
