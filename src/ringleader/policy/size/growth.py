"""Handing out the GPUs left over: the greedy that the elastic size stages share.

``greedy`` gives GPUs, one step of one job at a time, to the step that
saves most per GPU (``ringleader.policy.size.allocators`` defines the steps:
doubling, or one worker at a time). A job's steps from a size form a chain
(``ringleader.policy.size._incremental.chains``): each step is taken only after the one before
it, and the chain stops where the job is at its maximum, a step gains
nothing, a job not yet measured reaches the size it asked to start at, or a
grow would not win back its restart (``ringleader.policy.size.payback``).
Everything but the last depends only on the job's speed model and sizes
where the step stage's objective reads no progress (per epoch), so such a
stage passes ``Chains``: its chains are kept from one decision to the next,
and the greedy over them is a walk in a fixed order (``walk.walk``)
instead of a heap of every job's next step.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

from ringleader.policy.model.objective import Candidate
from ringleader.policy.model.plan import NO_MODEL, Note
from ringleader.policy.size._incremental import batched
from ringleader.policy.size._incremental.chain import Chain
from ringleader.policy.size._incremental.chains import Chains
from ringleader.policy.size._incremental.walk import scale_note, scaled_entry, walk
from ringleader.policy.size.payback import pays
from ringleader.policy.size.steps import (
    Counts,
    Entry,
    Step,
    StepOf,
    at_max,
    no_gain,
    not_won,
    outbid,
    start_size,
    weigh,
)

__all__ = ["Chains", "Counts", "Growth", "Step", "StepOf", "greedy", "start_size"]


class Growth(NamedTuple):
    """What ``grow`` returns: every job's size, and why each job it weighed stopped.

    ``notes``: a ``plan.Sizing`` as a plain ``Note``, for the jobs whose
    growth the allocator weighed; a job it did not is ``FIXED``
    (``plan.SizingNotes``). ``later``: more notes, written only if someone
    asks (most decisions' never are): over kept chains every walked job's
    (``walk.walk``), else those of the steps it had no GPUs for.
    """

    counts: Counts
    notes: dict[str, Note]
    later: Callable[[], dict[str, Note]] | None = None


def greedy(
    jobs: Sequence[Candidate],
    counts: Counts,
    free: int,
    step: StepOf,
    *,
    per_epoch: bool = False,
    chains: Chains | None = None,
    scaled: bool = False,
    sizes: list[int] | None = None,
) -> Growth:
    """Hand out GPUs by repeatedly taking the best-scoring next step of any job.

    ``step(c, w)`` returns ``(gpus added, objective at w, objective after)``
    for growing ``c`` from ``w`` workers, or ``None`` when it cannot grow
    (as at the job's ``max_gpus``, where over kept chains it is not asked); a
    step's score is the objective it saves per added GPU (``per_epoch``: the
    objective is seconds per epoch, not remaining seconds). A step that does
    not fit the GPUs left is dropped for good: free GPUs only ever shrink. A
    step that takes a running job past its size without winning back the
    restart is never taken (``ringleader.policy.size.payback``). ``chains``: the
    step stage's answers depend on nothing a job's progress changes, and its
    chains are kept there (see the module docstring).

    ``scaled``: ``step`` gives objectives per unit of work left (the job's
    ``Candidate.solo`` curve), and a job's are those times its remaining
    fraction, as ``Candidate.remaining_seconds`` gives them, to the bit. Its
    steps then read no progress but that one factor, so its chain is kept
    all the same; each decision scales its steps' objectives and works out
    their scores and leads from them as the heap would (``walk.scaled_entry``):
    a few multiplications a step, where the heap asked the models again.

    A job not yet measured (``Candidate.measured`` false) grows first, in
    FIFO order, up to its ``start_size``: its guessed model has no scale to
    compare with measured jobs
    (before its first report even its examples per epoch are unknown), and
    ranking it on the guess would give it GPUs one moment and take them back
    the moment it reports, a restart for nothing.

    ``sizes``: each job's count in ``counts`` by its place in ``jobs`` (0: none
    given there), where the caller has them so (``bases.LastBase.given``): read by
    place, not looked up by id (a twentieth of a decision at 50,000 jobs), but
    for the jobs given none.

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
    fractions: list[float] = []
    full: list[Candidate] = []
    """Jobs at their maximum, walked without a chain: no step grows a job past it."""
    full_at: list[int] = []
    """Their sizes."""
    rows: batched.Rows | None = None
    """The jobs a walk in numpy walks, gathered here (``batched.Rows``), for a large one."""
    if chains is not None and len(jobs) >= chains.batched_from:
        rows = batched.Rows(chains.flat, step, per_epoch, scaled)
    k = -1
    for c in jobs:
        k += 1
        job = c.job
        w = sizes[k] if sizes is not None else 0
        if w == 0:  # not given any there (a job given twice may have been elsewhere)
            w = out.get(job.id, 0)
        if w == 0 or not job.elastic:
            continue  # waiting, or FIXED (the default)
        if c.speed is None:
            notes[job.id] = (NO_MODEL, w)
            continue
        if chains is not None:
            if w >= job.max_gpus:
                # Half the jobs at 50,000: looking up their chains (with no step) and
                # walking them was a twentieth of the greedy there.
                full.append(c)
                full_at.append(w)
                continue
            chain = chains.of(c, w)
            of.append(chain)
            if rows is not None:
                rows.add(len(by_index), c, chain, job.remaining_fraction)
        by_index.append(c)
        if scaled:
            fractions.append(job.remaining_fraction)
    scales = fractions if scaled else None
    if chains is not None:
        if rows is not None:
            later = batched.walk(by_index, of, free, per_epoch, out, scales, chains, rows)
        else:
            later = walk(by_index, of, free, step, per_epoch, out, scales, chains.window)
        return Growth(out, notes, _AtMax(full, full_at, per_epoch, later) if full else later)
    heap: list[tuple[float, int, int]] = []
    current: list[Entry | None] = [None] * len(by_index)
    """Each job's step in the heap (or dropped)."""
    dropped: list[tuple[int, int]] = []
    """Steps not taken because they did not fit the GPUs left: (job index, GPUs left)."""
    bar: float | None = None

    def push(i: int, c: Candidate, sift: bool = True) -> None:
        entry, end = weigh(c, out[c.job.id], step, per_epoch)
        if entry is None:
            assert end is not None  # weigh() gives one or the other
            notes[c.job.id] = end if scales is None else scale_note(end, scales[i])
            return
        w, add, before, after, score = entry
        if scales is not None:
            entry = w, add, before, after, score = scaled_entry(entry, scales[i])
            if not score > 0:  # none of the job left (or too little to tell)
                notes[c.job.id] = no_gain(c, w, add, before, after, per_epoch)
                return
        if not pays(c, w + add):
            notes[c.job.id] = not_won(c, w, add, before, after, per_epoch)
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
        push(i, c)
    if not heap and not dropped:
        return Growth(out, notes)

    def outbid_notes() -> dict[str, Note]:
        """Steps dropped for want of GPUs, and those left when they ran out (free is 0)."""
        later: dict[str, Note] = {}
        for i, left in [*dropped, *((e[1], free) for e in heap)]:
            c = by_index[i]
            later[c.job.id] = outbid(c, current[i] or (0, 0, 0.0, 0.0, 0.0), per_epoch, left, bar)
        return later

    return Growth(out, notes, outbid_notes)


class _AtMax:
    """The notes of the jobs at their maximum (``chains.at_max``), with the walk's: worked
    out when first asked, as the walk's are."""

    __slots__ = ("jobs", "per_epoch", "sizes", "then")

    def __init__(
        self,
        jobs: list[Candidate],
        sizes: list[int],
        per_epoch: bool,
        then: Callable[[], dict[str, Note]],
    ) -> None:
        self.jobs = jobs
        self.sizes = sizes
        self.per_epoch = per_epoch
        self.then = then

    def __call__(self) -> dict[str, Note]:
        notes = self.then()
        jobs, sizes, per_epoch = self.jobs, self.sizes, self.per_epoch
        for i in range(len(jobs)):
            notes[jobs[i].job.id] = at_max(jobs[i], sizes[i], per_epoch)
        return notes
