"""How many GPUs each job gets: the allocation stage of the policy core.

An allocator works in two steps so that profiling can interleave its own
claims between them (see ``ringleader.policy.profiling``):

* ``base``: the minimum each job needs to run at all, in FIFO order, stopping
  at the first job that does not fit (no backfilling past it, so a wide job is
  never starved by a stream of narrow ones);
* ``grow``: how the GPUs left over are handed out.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ringleader.policy.objective import Candidate
from ringleader.policy.payback import pays
from ringleader.policy.views import JobView

Counts = dict[str, int]


class Allocator(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def needs_speed(self) -> bool:
        """Whether the allocator predicts from speed models (so needs profiling)."""
        ...

    @property
    def needs_true_remaining(self) -> bool:
        """Whether it ranks jobs by their true remaining time (an oracle)."""
        ...

    def base(self, jobs: Sequence[Candidate], capacity: int) -> Counts: ...

    def grow(self, jobs: Sequence[Candidate], counts: Counts, free: int) -> Counts: ...


def fifo_base(jobs: Sequence[Candidate], capacity: int, size_of: _SizeOf) -> Counts:
    """Give each job ``size_of(job)`` GPUs in order until one does not fit."""
    counts: Counts = {}
    free = capacity
    for c in jobs:
        need = size_of(c)
        if need > free:
            break
        counts[c.job.id] = need
        free -= need
    return counts


class _SizeOf(Protocol):
    def __call__(self, c: Candidate, /) -> int: ...


def start_size(job: JobView) -> int:
    """The most an elastic job gets before it is measured: its spec's ``gpus``, when raised.

    An elastic job whose ``gpus`` is above its minimum asked to start there;
    left at the minimum (the default) it states no start, and unmeasured
    growth goes up to its maximum. Measured, the speed model decides.
    """
    if job.elastic and job.requested_gpus > job.min_gpus:
        return job.requested_gpus
    return job.max_gpus


def _elastic_start(c: Candidate) -> int:
    job = c.job
    return job.min_gpus if job.elastic else job.requested_gpus


@dataclass(frozen=True, slots=True)
class FixedSize:
    """Every job runs at one fixed size and waits its turn (the Fixed-N baselines).

    ``size=None`` uses each job's own request instead of one size for all.
    """

    size: int | None = None
    needs_speed: bool = False
    needs_true_remaining: bool = False

    @property
    def name(self) -> str:
        return "fifo" if self.size is None else f"fixed-{self.size}"

    def _size(self, c: Candidate) -> int:
        return c.job.requested_gpus if self.size is None else self.size

    def base(self, jobs: Sequence[Candidate], capacity: int) -> Counts:
        return fifo_base(jobs, capacity, self._size)

    def grow(self, jobs: Sequence[Candidate], counts: Counts, free: int) -> Counts:
        return dict(counts)


def _greedy(
    jobs: Sequence[Candidate],
    counts: Counts,
    free: int,
    step: _Step,
) -> Counts:
    """Hand out GPUs by repeatedly taking the best-scoring next step of any job.

    ``step(c, w)`` returns ``(gpus added, score)`` for growing ``c`` from ``w``
    workers, or ``None`` when it cannot grow. A step that does not fit the GPUs
    left is dropped for good: free GPUs only ever shrink. A step that takes a
    running job past its size without winning back the restart is never taken
    (``ringleader.policy.payback``).

    A job not yet measured (``Candidate.measured`` false) grows first, in
    FIFO order, up to its ``start_size``: its guessed model has no scale to
    compare with measured jobs
    (before its first report even its examples per epoch are unknown), and
    ranking it on the guess would give it GPUs one moment and take them back
    the moment it reports, a restart for nothing.
    """
    out = dict(counts)
    heap: list[tuple[float, int, int]] = []
    by_index = list(jobs)

    def push(i: int, c: Candidate, w: int) -> None:
        nxt = step(c, w)
        if nxt is not None and not c.measured and w + nxt[0] > start_size(c.job):
            return  # not measured yet: no bigger than the size it asked to start at
        if nxt is not None and nxt[1] > 0 and pays(c, w + nxt[0]):
            heapq.heappush(heap, (-(nxt[1] if c.measured else math.inf), i, nxt[0]))

    for i, c in enumerate(by_index):
        w = out.get(c.job.id, 0)
        if w == 0 or not c.job.elastic or c.speed is None:
            continue
        push(i, c, w)
    while heap and free > 0:
        _, i, add = heapq.heappop(heap)
        if add > free:
            continue
        c = by_index[i]
        w = out[c.job.id] + add
        out[c.job.id] = w
        free -= add
        push(i, c, w)
    return out


class _Step(Protocol):
    def __call__(self, c: Candidate, w: int, /) -> tuple[int, float] | None: ...


@dataclass(frozen=True, slots=True)
class Doubling:
    """The doubling heuristic (SPEC A4): double the job with the best gain per GPU.

    Gain per GPU of doubling ``w → 2w`` is ``(R(w) − R(2w)) / w``, ``R`` the
    predicted remaining time. Sizes stay powers of two times the starting size,
    so a bad non-power-of-two step (8 → 9) never blocks a good doubling
    (8 → 16).
    """

    name: str = "doubling"
    needs_speed: bool = True
    needs_true_remaining: bool = False

    def base(self, jobs: Sequence[Candidate], capacity: int) -> Counts:
        return fifo_base(jobs, capacity, _elastic_start)

    @staticmethod
    def _step(c: Candidate, w: int) -> tuple[int, float] | None:
        if 2 * w > c.job.max_gpus:
            return None
        return w, (c.remaining_seconds(w) - c.remaining_seconds(2 * w)) / w

    def grow(self, jobs: Sequence[Candidate], counts: Counts, free: int) -> Counts:
        return _greedy(jobs, counts, free, self._step)


@dataclass(frozen=True, slots=True)
class OptimusGreedy:
    """Optimus' heuristic: add one worker at a time where it cuts remaining time most.

    It stops at the first step that does not help, so it stalls where ``w+1``
    is worse than ``w`` even if ``2w`` would be much better.
    """

    name: str = "optimus"
    needs_speed: bool = True
    needs_true_remaining: bool = False

    def base(self, jobs: Sequence[Candidate], capacity: int) -> Counts:
        return fifo_base(jobs, capacity, _elastic_start)

    @staticmethod
    def _step(c: Candidate, w: int) -> tuple[int, float] | None:
        if w + 1 > c.job.max_gpus:
            return None
        return 1, c.remaining_seconds(w) - c.remaining_seconds(w + 1)

    def grow(self, jobs: Sequence[Candidate], counts: Counts, free: int) -> Counts:
        return _greedy(jobs, counts, free, self._step)
