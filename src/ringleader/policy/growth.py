"""Handing out the GPUs left over: the greedy that the elastic size stages share.

``greedy`` gives GPUs, one step of one job at a time, to the step that
saves most per GPU (``ringleader.policy.allocator`` defines the steps:
doubling, or one worker at a time). A job's steps from a size form a
chain: each step is taken only after the one before it, and the chain
stops where the job is at its maximum, a step gains nothing, a job not yet
measured reaches the size it asked to start at, or a grow would not win
back its restart (``ringleader.policy.payback``). Everything but the last
depends only on the job's speed model and sizes where the step stage's
objective reads no progress (per epoch), so such a stage passes ``Chains``
and has its chains kept from one decision to the next instead of asking its
models again.

Where every job's whole chain fits the GPUs left, the order in which the
steps are taken changes nothing: each job ends at its chain's end. That is
most decisions of a lightly loaded cluster, and they skip the heap.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol

from ringleader.policy.objective import Candidate, SoloCurve
from ringleader.policy.payback import may_refuse, pays, saved_by
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

Step = tuple[int, float, float]
"""A growth step as a step stage returns it: GPUs added, objective before, objective after."""


class StepOf(Protocol):
    def __call__(self, c: Candidate, w: int, /) -> Step | None: ...


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


def start_size(job: JobView) -> int:
    """The most an elastic job gets before it is measured: its spec's ``gpus``, when raised.

    An elastic job whose ``gpus`` is above its minimum asked to start there;
    left at the minimum (the default) it states no start, and unmeasured
    growth goes up to its maximum. Measured, the speed model decides.
    """
    if job.elastic and job.requested_gpus > job.min_gpus:
        return job.requested_gpus
    return job.max_gpus


class Chain:
    """A job's growth steps from one size, worked out as far as asked, and where they stop.

    ``steps[k]`` is ``(workers before, GPUs added, objective before, objective
    after, score)``; ``end`` is the note where the chain stops for a reason of
    its own (at its maximum, no gain, not yet measured), None until reached.
    The restart test is not part of a chain: it reads the job's progress.
    """

    __slots__ = ("end", "reached", "start", "steps")

    def __init__(self, workers: int) -> None:
        self.steps: list[Entry] = []
        self.end: Note | None = None
        self.start = workers
        self.reached = workers
        """The size after the steps worked out so far."""

    def at(self, k: int, c: Candidate, step: StepOf, per_epoch: bool) -> bool:
        """Whether the chain has a step ``k``, working it out (with ``c``) if need be."""
        steps = self.steps
        while len(steps) <= k:
            if self.end is not None:
                return False
            w = self.reached
            entry, end = weigh(c, w, step, per_epoch)
            if entry is None:
                self.end = end
                return False
            steps.append(entry)
            self.reached = w + entry[1]
        return True

    def complete(self, c: Candidate, step: StepOf, per_epoch: bool) -> Note:
        """Work the chain out to its end (once per chain); the note where it stops."""
        while self.end is None:
            self.at(len(self.steps), c, step, per_epoch)
        return self.end


Entry = tuple[int, int, float, float, float]
"""A step as the greedy weighs it: workers before, GPUs added, objective before and
after, and its score (objective saved per GPU)."""


def weigh(
    c: Candidate, w: int, step: StepOf, per_epoch: bool
) -> tuple[Entry, None] | tuple[None, Note]:
    """``c``'s step from ``w`` workers, or the note where its growth stops for a reason of
    its own: at its maximum, not yet measured past its start size, or no gain."""
    nxt = step(c, w)
    if nxt is None:
        return None, (AT_MAX, w, None, None, None, per_epoch, *_NONE3, c.job.max_gpus)
    add, before, after = nxt
    if not c.measured and w + add > start_size(c.job):
        # Not measured yet: no bigger than the size it asked to start at.
        return None, (UNMEASURED, w, w + add, before, after, per_epoch, *_NONE5, False)
    score = (before - after) / add
    if score <= 0:
        return None, (NO_GAIN, w, w + add, before, after, per_epoch, *_NONE5, c.measured)
    return (w, add, before, after, score), None


class Chains:
    """The chains of a step stage whose steps read no progress, kept across decisions.

    A chain is a function of the candidate's memoised curve (its speed model
    and epochs), its maximum, whether it is measured and, if not, its start
    size, and the size it starts from: a decision asks for the same few, so
    it finds them here instead of asking the models step by step. Cleared
    when it holds ``limit`` chains, so it stays bounded.
    """

    __slots__ = ("_by_job", "_chains", "limit")

    def __init__(self, limit: int = 1 << 17) -> None:
        self._chains: dict[tuple[SoloCurve | None, int, int, int], Chain] = {}
        self._by_job: dict[str, tuple[Candidate, int, Chain]] = {}
        """Each job's last candidate and size with their chain: the same candidate object
        (``profiling.LastCandidates``) from the same size has the same chain."""
        self.limit = limit

    def of(self, c: Candidate, workers: int) -> Chain:
        job = c.job
        hit = self._by_job.get(job.id)
        if hit is not None and hit[0] is c and hit[1] == workers:
            return hit[2]
        key = (c.solo, workers, job.max_gpus, 0 if c.measured else start_size(job))
        chain = self._chains.get(key)
        if chain is None:
            if len(self._chains) >= self.limit or len(self._by_job) >= self.limit:
                self._chains.clear()
                self._by_job.clear()
            chain = self._chains[key] = Chain(workers)
        self._by_job[job.id] = (c, workers, chain)
        return chain


def greedy(
    jobs: Sequence[Candidate],
    counts: Counts,
    free: int,
    step: StepOf,
    *,
    per_epoch: bool = False,
    chains: Chains | None = None,
) -> Growth:
    """Hand out GPUs by repeatedly taking the best-scoring next step of any job.

    ``step(c, w)`` returns ``(gpus added, objective at w, objective after)``
    for growing ``c`` from ``w`` workers, or ``None`` when it cannot grow; a
    step's score is the objective it saves per added GPU (``per_epoch``: the
    objective is seconds per epoch, not remaining seconds). A step that does
    not fit the GPUs left is dropped for good: free GPUs only ever shrink. A
    step that takes a running job past its size without winning back the
    restart is never taken (``ringleader.policy.payback``). ``chains``: the
    step stage's answers depend on nothing a job's progress changes, and its
    chains are kept there (see the module docstring).

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
    by_index: list[Candidate] = []
    of: list[Chain] = []
    for c in jobs:
        w = out.get(c.job.id, 0)
        if w == 0 or not c.job.elastic:
            continue  # waiting, or FIXED (the default)
        if c.speed is None:
            notes[c.job.id] = (NO_MODEL, w)
            continue
        by_index.append(c)
        if chains is not None:
            of.append(chains.of(c, w))
    if chains is not None and _all_fit(by_index, of, free, step, per_epoch, out, notes):
        return Growth(out, notes)
    heap: list[tuple[float, int, int]] = []
    current: list[Entry | None] = [None] * len(by_index)
    """Each job's step in the heap (or dropped)."""
    position = [0] * len(by_index)
    """With kept chains, the index of that step in the job's chain."""
    dropped: list[tuple[int, int]] = []
    """Steps not taken because they did not fit the GPUs left: (job index, GPUs left)."""
    bar: float | None = None

    def push(i: int, c: Candidate, sift: bool = True) -> None:
        entry: Entry | None
        end: Note | None
        if chains is None:
            entry, end = weigh(c, out[c.job.id], step, per_epoch)
        else:
            chain, k = of[i], position[i]
            if chain.at(k, c, step, per_epoch):
                entry, end = chain.steps[k], None
            else:
                entry, end = None, chain.end
        if entry is None:
            assert end is not None  # weigh() gives one or the other
            notes[c.job.id] = end
            return
        w, add, before, after, score = entry
        if not pays(c, w + add):
            notes[c.job.id] = _not_won(c, w, add, before, after, per_epoch)
            return
        current[i] = entry
        key = (-(score if c.measured else math.inf), i, add)
        if sift:
            heapq.heappush(heap, key)
        else:
            heap.append(key)

    for i, c in enumerate(by_index):
        push(i, c, sift=False)
    heapq.heapify(heap)  # keys are unique (by index): pops come in the same order
    while heap and free > 0:
        neg, i, add = heapq.heappop(heap)
        if add > free:
            dropped.append((i, free))
            continue
        c = by_index[i]
        out[c.job.id] += add
        free -= add
        if c.measured:
            bar = -neg if bar is None else min(bar, -neg)
        position[i] += 1
        push(i, c)
    if not heap and not dropped:
        return Growth(out, notes)

    def outbid() -> dict[str, Note]:
        """Steps dropped for want of GPUs, and those left when they ran out (free is 0)."""
        later: dict[str, Note] = {}
        for i, left in [*dropped, *((e[1], free) for e in heap)]:
            c = by_index[i]
            w, add, before, after, _ = current[i] or (0, 0, 0.0, 0.0, 0.0)
            note = (OUTBID, w, w + add, before, after, per_epoch, left, bar, *_NONE3, c.measured)
            later[c.job.id] = note
        return later

    return Growth(out, notes, outbid)


def _all_fit(
    jobs: list[Candidate],
    of: list[Chain],
    free: int,
    step: StepOf,
    per_epoch: bool,
    out: Counts,
    notes: dict[str, Note],
) -> bool:
    """Every job grown to where its chain (or the restart test) stops it, into ``out`` and
    ``notes``, if all of that fits ``free``; False, with ``out`` untouched, if not.

    Where it fits, no step is ever dropped and no order of taking them leaves one
    out, so this is what the greedy would give.
    """
    ends: list[tuple[int, Note]] = []
    total = 0
    for i in range(len(jobs)):
        c, chain = jobs[i], of[i]
        end = chain.complete(c, step, per_epoch)
        job = c.job
        if chain.reached <= job.workers or not may_refuse(c):
            # No step takes it past where it runs, or none could fail the restart test.
            total += chain.reached - chain.start
            if total > free:
                return False
            ends.append((chain.reached, end))
            continue
        for w, add, before, after, _ in chain.steps:
            if not pays(c, w + add):
                ends.append((w, _not_won(c, w, add, before, after, per_epoch)))
                break
            total += add
            if total > free:
                return False
        else:
            ends.append((chain.reached, end))
    for i in range(len(jobs)):
        w, note = ends[i]
        job_id = jobs[i].job.id
        out[job_id] = w
        notes[job_id] = note
    return True


def _not_won(c: Candidate, w: int, add: int, before: float, after: float, per_epoch: bool) -> Note:
    return (RESTART_NOT_WON, w, w + add, before, after, per_epoch, None, None, saved_by(c, w + add))


_NONE3 = (None,) * 3
_NONE5 = (None,) * 5
