"""How many GPUs each job gets: the size stage of the policy core.

A size stage (an ``Allocator``) works in two steps so that profiling can
interleave its own claims between them (see ``ringleader.policy.profiling``).
Both take the jobs in the order the order stage put them
(``ringleader.policy.order``):

* ``base``: the minimum each job needs to run at all, in that order. Without
  ``backfill`` it stops at the first job that does not fit, so a wide job is
  never starved by a stream of narrow ones; with it, smaller jobs behind may
  run, so GPUs do not idle behind a wide job (Tiresias does this; a
  preemptive order is what keeps the wide job from starving);
* ``grow``: how the GPUs left over are handed out, with the allocator's own
  account of where each job's growth stopped (``Sizing``: at its maximum, no
  gain, the restart not won back, or outbid for the GPUs left).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from ringleader.policy.objective import Candidate
from ringleader.policy.payback import pays, saved_by
from ringleader.policy.plan import (
    AT_MAX,
    NO_GAIN,
    NO_MODEL,
    OUTBID,
    RESTART_NOT_WON,
    UNMEASURED,
    Note,
)
from ringleader.policy.views import JobView

Counts = dict[str, int]


class Growth(NamedTuple):
    """What ``grow`` returns: every job's size, and why each job it weighed stopped.

    ``notes``: a ``plan.Sizing`` as a plain ``Note``, for the jobs whose
    growth the allocator weighed; a job it did not is ``FIXED``
    (``plan.SizingNotes``). ``later``: the notes of the steps it had no
    GPUs for, written only if someone asks (most decisions' never are).
    """

    counts: Counts
    notes: dict[str, Note]
    later: Callable[[], dict[str, Note]] | None = None


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

    def grow(self, jobs: Sequence[Candidate], counts: Counts, free: int) -> Growth: ...


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


def backfill_base(jobs: Sequence[Candidate], capacity: int, size_of: _SizeOf) -> Counts:
    """Give each job, in order, ``size_of(job)`` GPUs if that many are still free."""
    counts: Counts = {}
    free = capacity
    for c in jobs:
        need = size_of(c)
        if need <= free:
            counts[c.job.id] = need
            free -= need
    return counts


def start_size(job: JobView) -> int:
    """The most an elastic job gets before it is measured: its spec's ``gpus``, when raised.

    An elastic job whose ``gpus`` is above its minimum asked to start there;
    left at the minimum (the default) it states no start, and unmeasured
    growth goes up to its maximum. Measured, the speed model decides.
    """
    if job.elastic and job.requested_gpus > job.min_gpus:
        return job.requested_gpus
    return job.max_gpus


def least_size(job: JobView) -> int:
    """The fewest GPUs ``job`` runs on: its minimum if elastic, else its request.

    What the elastic allocators' ``base`` gives each job in order, and so the
    size time-slicing groups jobs by when GPUs are short."""
    return job.min_gpus if job.elastic else job.requested_gpus


def _elastic_start(c: Candidate) -> int:
    return least_size(c.job)


@dataclass(frozen=True, slots=True)
class FixedSize:
    """Every job runs at one fixed size and waits its turn (the Fixed-N baselines).

    ``size=None`` uses each job's own request instead of one size for all;
    ``backfill`` lets smaller jobs run past one that does not fit.
    """

    size: int | None = None
    backfill: bool = False
    needs_speed: bool = False
    needs_true_remaining: bool = False

    @property
    def name(self) -> str:
        return "fifo" if self.size is None else f"fixed-{self.size}"

    def _size(self, c: Candidate) -> int:
        return c.job.requested_gpus if self.size is None else self.size

    def base(self, jobs: Sequence[Candidate], capacity: int) -> Counts:
        return (backfill_base if self.backfill else fifo_base)(jobs, capacity, self._size)

    def grow(self, jobs: Sequence[Candidate], counts: Counts, free: int) -> Growth:
        return Growth(dict(counts), {})


def _greedy(
    jobs: Sequence[Candidate],
    counts: Counts,
    free: int,
    step: _Step,
    *,
    per_epoch: bool = False,
) -> Growth:
    """Hand out GPUs by repeatedly taking the best-scoring next step of any job.

    ``step(c, w)`` returns ``(gpus added, objective at w, objective after)``
    for growing ``c`` from ``w`` workers, or ``None`` when it cannot grow; a
    step's score is the objective it saves per added GPU (``per_epoch``: the
    objective is seconds per epoch, not remaining seconds). A step that does
    not fit the GPUs left is dropped for good: free GPUs only ever shrink. A
    step that takes a running job past its size without winning back the
    restart is never taken (``ringleader.policy.payback``).

    A job not yet measured (``Candidate.measured`` false) grows first, in
    FIFO order, up to its ``start_size``: its guessed model has no scale to
    compare with measured jobs
    (before its first report even its examples per epoch are unknown), and
    ranking it on the guess would give it GPUs one moment and take them back
    the moment it reports, a restart for nothing.

    Where each job's growth stopped, and on what numbers, is noted as it
    happens (``Growth``).
    """
    out = dict(counts)
    # Notes are plain tuples in ``Sizing``'s field order (see ``plan.Sizing``):
    # stop, workers, next_workers, before_s, after_s, per_epoch, free, bar,
    # saved_s, limit, held, measured.
    notes: dict[str, Note] = {}
    heap: list[tuple[float, int, int]] = []
    by_index = list(jobs)
    queued: list[tuple[int, float, float] | None] = [None] * len(by_index)
    """Each job's step in the heap, as ``step`` returned it."""
    dropped: list[tuple[int, int]] = []
    """Steps not taken because they did not fit the GPUs left: (job index, GPUs left)."""
    bar: float | None = None

    def push(i: int, c: Candidate, w: int) -> None:
        nxt = step(c, w)
        if nxt is None:
            notes[c.job.id] = (AT_MAX, w, None, None, None, per_epoch, *_NONE3, c.job.max_gpus)
            return
        add, before, after = nxt
        if not c.measured and w + add > start_size(c.job):
            # Not measured yet: no bigger than the size it asked to start at.
            notes[c.job.id] = (UNMEASURED, w, w + add, before, after, per_epoch, *_NONE5, False)
            return
        score = (before - after) / add
        if score <= 0:
            notes[c.job.id] = (NO_GAIN, w, w + add, before, after, per_epoch, *_NONE5, c.measured)
            return
        if not pays(c, w + add):
            saved = saved_by(c, w + add)
            notes[c.job.id] = (
                RESTART_NOT_WON,
                w,
                w + add,
                before,
                after,
                per_epoch,
                None,
                None,
                saved,
            )
            return
        queued[i] = nxt
        heapq.heappush(heap, (-(score if c.measured else math.inf), i, add))

    for i, c in enumerate(by_index):
        w = out.get(c.job.id, 0)
        if w == 0 or not c.job.elastic:
            continue  # waiting, or FIXED (the default)
        if c.speed is None:
            notes[c.job.id] = (NO_MODEL, w)
        else:
            push(i, c, w)
    while heap and free > 0:
        neg, i, add = heapq.heappop(heap)
        if add > free:
            dropped.append((i, free))
            continue
        c = by_index[i]
        w = out[c.job.id] + add
        out[c.job.id] = w
        free -= add
        if c.measured:
            bar = -neg if bar is None else min(bar, -neg)
        push(i, c, w)
    if not heap and not dropped:
        return Growth(out, notes)

    def outbid() -> dict[str, Note]:
        """Steps dropped for want of GPUs, and those left when they ran out (free is 0)."""
        later: dict[str, Note] = {}
        for i, left in [*dropped, *((e[1], free) for e in heap)]:
            c = by_index[i]
            w = out[c.job.id]
            add, before, after = queued[i] or (0, 0.0, 0.0)
            note = (OUTBID, w, w + add, before, after, per_epoch, left, bar, *_NONE3, c.measured)
            later[c.job.id] = note
        return later

    return Growth(out, notes, outbid)


_NONE3 = (None,) * 3
_NONE5 = (None,) * 5


class _Step(Protocol):
    def __call__(self, c: Candidate, w: int, /) -> tuple[int, float, float] | None: ...


@dataclass(frozen=True, slots=True)
class Doubling:
    """The doubling heuristic (SPEC A4): double the job with the best gain per GPU.

    Gain per GPU of doubling ``w → 2w`` is ``(R(w) − R(2w)) / w``, ``R`` the
    predicted remaining time. Sizes stay powers of two times the starting size,
    so a bad non-power-of-two step (8 → 9) never blocks a good doubling
    (8 → 16).

    ``per_epoch``: score a doubling by the time per epoch it saves per GPU
    instead, every job's remaining work counted as one epoch, for a
    scheduler that does not know how long a job will run (the ``ringleader``
    policy). ``backfill``: see ``FixedSize``.
    """

    name: str = "doubling"
    backfill: bool = False
    per_epoch: bool = False
    needs_speed: bool = True
    needs_true_remaining: bool = False

    def base(self, jobs: Sequence[Candidate], capacity: int) -> Counts:
        return (backfill_base if self.backfill else fifo_base)(jobs, capacity, _elastic_start)

    @staticmethod
    def _step(c: Candidate, w: int) -> tuple[int, float, float] | None:
        if 2 * w > c.job.max_gpus:
            return None
        return w, c.remaining_seconds(w), c.remaining_seconds(2 * w)

    @staticmethod
    def _epoch_step(c: Candidate, w: int) -> tuple[int, float, float] | None:
        if 2 * w > c.job.max_gpus or c.speed is None:
            return None
        return w, c.epoch_seconds(w), c.epoch_seconds(2 * w)

    def grow(self, jobs: Sequence[Candidate], counts: Counts, free: int) -> Growth:
        if self.per_epoch:
            return _greedy(jobs, counts, free, self._epoch_step, per_epoch=True)
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
    def _step(c: Candidate, w: int) -> tuple[int, float, float] | None:
        if w + 1 > c.job.max_gpus:
            return None
        return 1, c.remaining_seconds(w), c.remaining_seconds(w + 1)

    def grow(self, jobs: Sequence[Candidate], counts: Counts, free: int) -> Growth:
        return _greedy(jobs, counts, free, self._step)
