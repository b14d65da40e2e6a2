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
and the greedy over them is a walk in a fixed order instead of a heap of
every job's next step (``_incremental.kept.grow_over_chains``, to the bit the
heap's sizes and notes: ``tests/test_growth.py``).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

from ringleader.policy.model.objective import Candidate
from ringleader.policy.model.plan import NO_MODEL, Note, note, scaled_objectives
from ringleader.policy.size._incremental.chains import Chains
from ringleader.policy.size._incremental.kept import grow_over_chains
from ringleader.policy.size.payback import pays
from ringleader.policy.size.steps import (
    Counts,
    Entry,
    Growth,
    Step,
    StepOf,
    no_gain,
    not_won,
    outbid,
    scaled_entry,
    start_size,
    weigh,
)

__all__ = ["Chains", "Counts", "Growth", "Step", "StepOf", "greedy", "start_size"]


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
    for growing ``c`` from ``w`` workers, or ``None`` when it cannot grow; a
    step's score is the objective it saves per added GPU (``per_epoch``: the
    objective is seconds per epoch, not remaining seconds). A step that does
    not fit the GPUs left is dropped for good: free GPUs only ever shrink. A
    step that takes a running job past its size without winning back the
    restart is never taken (``payback``).

    A job not yet measured (``Candidate.measured`` false) grows first, in
    FIFO order, up to its ``start_size``: its guessed model has no scale to
    compare with measured jobs, and ranking it on the guess would give it GPUs
    one moment and take them back the moment it reports, a restart for nothing.

    ``chains``: the step stage's answers read no progress, and its chains are
    kept there (the module docstring). ``scaled``: ``step`` gives objectives per
    unit of work left, and a job's are those times its remaining fraction, as
    ``Candidate.remaining_seconds`` gives them. ``sizes``: each job's count in
    ``counts`` by its place in ``jobs`` (0: look it up), where the caller has
    them so. Where each job's growth stopped, and on what numbers, is noted as
    it happens (``Growth``).
    """
    if chains is not None:
        return grow_over_chains(jobs, counts, free, step, per_epoch, chains, scaled, sizes)
    out = dict(counts)
    notes: dict[str, Note] = {}
    by_index: list[Candidate] = []
    fractions: list[float] = []
    for k, c in enumerate(jobs):
        job = c.job
        w = sizes[k] if sizes is not None else 0
        if w == 0:
            w = out.get(job.id, 0)
        if w == 0 or not job.elastic:
            continue  # waiting, or FIXED (the default)
        if c.speed is None:
            notes[job.id] = note(NO_MODEL, w)
            continue
        by_index.append(c)
        if scaled:
            fractions.append(job.remaining_fraction)
    return _by_heap(by_index, out, notes, free, step, per_epoch, fractions if scaled else None)


def _by_heap(
    by_index: list[Candidate],
    out: Counts,
    notes: dict[str, Note],
    free: int,
    step: StepOf,
    per_epoch: bool,
    scales: list[float] | None,
) -> Growth:
    """The greedy itself: a heap of every job's next step, popped while GPUs are left."""
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
            notes[c.job.id] = end if scales is None else scaled_objectives(end, scales[i])
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
