"""A job's growth steps as a chain, kept across decisions, and the walk that hands them out.

A job's steps from a size form a chain: each step is taken only after the
one before it, and the chain stops where the job is at its maximum, a step
gains nothing, or a job not yet measured reaches the size it asked to start
at. Where the step stage's objective reads no progress (per epoch), a chain
depends only on the job's speed model and sizes, so it is kept from one
decision to the next (``Chains``) instead of asking the models again.

The greedy (``ringleader.policy.growth``) takes, one at a time, the best
next step of any job. Over kept chains that is a walk in a fixed order,
which ``walk`` takes without a heap for most of its length: a step is
reached once every step before it in its chain is taken, so it comes
when the greedy's heap would pop its *lead*, the worst key along the chain
up to it (a later, better-scoring step waits for the worse one before it).
So the greedy takes the steps in the order of (lead, the job's place in
the order, the step's place in its chain), taking each that fits the GPUs
left, dropping a job for good at its first step that does not fit, and
stopping a chain at the first grow that would not win back its restart
(``ringleader.policy.payback``). Every level of lead whose steps all fit
the GPUs left is taken whole, in any order; only the steps from the first
level that does not fit onward need the heap, and they stop where the GPUs
run out.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left
from collections.abc import Callable, Sequence
from typing import Protocol

from ringleader.policy.objective import Candidate, SoloCurve
from ringleader.policy.payback import may_refuse, pays, saved_by
from ringleader.policy.plan import AT_MAX, NO_GAIN, OUTBID, RESTART_NOT_WON, UNMEASURED, Note
from ringleader.policy.views import JobView

Counts = dict[str, int]

Step = tuple[int, float, float]
"""A growth step as a step stage returns it: GPUs added, objective before, objective after."""


class StepOf(Protocol):
    def __call__(self, c: Candidate, w: int, /) -> Step | None: ...


Entry = tuple[int, int, float, float, float]
"""A step as the greedy weighs it: workers before, GPUs added, objective before and
after, and its score (objective saved per GPU)."""


def start_size(job: JobView) -> int:
    """The most an elastic job gets before it is measured: its spec's ``gpus``, when raised.

    An elastic job whose ``gpus`` is above its minimum asked to start there;
    left at the minimum (the default) it states no start, and unmeasured
    growth goes up to its maximum. Measured, the speed model decides.
    """
    if job.elastic and job.requested_gpus > job.min_gpus:
        return job.requested_gpus
    return job.max_gpus


def weigh(
    c: Candidate, w: int, step: StepOf, per_epoch: bool
) -> tuple[Entry, None] | tuple[None, Note]:
    """``c``'s step from ``w`` workers, or the note where its growth stops for a reason of
    its own: at its maximum, not yet measured past its start size, or no gain."""
    nxt = step(c, w)
    if nxt is None:
        return None, (AT_MAX, w, None, None, None, per_epoch, *NONE3, c.job.max_gpus)
    add, before, after = nxt
    if not c.measured and w + add > start_size(c.job):
        # Not measured yet: no bigger than the size it asked to start at.
        return None, (UNMEASURED, w, w + add, before, after, per_epoch, *NONE5, False)
    score = (before - after) / add
    if not score > 0:  # no gain, or none to speak of (NaN: an objective of inf at both sizes)
        return None, no_gain(c, w, add, before, after, per_epoch)
    return (w, add, before, after, score), None


def no_gain(c: Candidate, w: int, add: int, before: float, after: float, per_epoch: bool) -> Note:
    """The note of a grow from ``w`` by ``add`` that saves nothing."""
    return (NO_GAIN, w, w + add, before, after, per_epoch, *NONE5, c.measured)


def not_won(c: Candidate, w: int, add: int, before: float, after: float, per_epoch: bool) -> Note:
    """The note of a grow from ``w`` by ``add`` that would not win back its restart."""
    return (RESTART_NOT_WON, w, w + add, before, after, per_epoch, None, None, saved_by(c, w + add))


def outbid(c: Candidate, entry: Entry, per_epoch: bool, gpus: int, bar: float | None) -> Note:
    """The note of ``c``'s step ``entry``, not taken for want of GPUs: ``gpus`` were left,
    and ``bar`` was the lowest score of a step a measured job took."""
    w, add, before, after, _ = entry
    return (OUTBID, w, w + add, before, after, per_epoch, gpus, bar, *NONE3, c.measured)


class Chain:
    """A job's growth steps from one size, and where they stop.

    ``steps[k]`` is an ``Entry``; ``end`` is the note where the chain stops
    for a reason of its own (at its maximum, no gain, not yet measured). The
    restart test is not part of a chain: it reads the job's progress. A
    chain is worked out whole, once, the first time a decision walks it
    (``lay_out``), with what ``walk`` reads: each step's lead, the size after
    each step, and the GPUs of each run of steps with one lead.
    """

    __slots__ = ("adds", "end", "leads", "runs", "sizes", "start", "steps")

    def __init__(self, workers: int) -> None:
        self.start = workers
        self.steps: list[Entry] = []
        self.end: Note | None = None
        self.leads: list[float] = []
        """Per step, the greedy's key for the worst step up to it (lower is taken first)."""
        self.sizes: list[int] = [workers]
        """``sizes[k]``: the size once the first ``k`` steps are taken."""
        self.adds: list[int] = []
        """``adds[k]``: the GPUs step ``k`` adds (``steps[k][1]``, read without unpacking
        the step: compiled, reading an item of a tuple in a list unpacks all of it)."""
        self.runs: list[tuple[float, int]] | None = None
        """(lead, GPUs) per run of steps with one lead; None until laid out."""

    def lay_out(self, c: Candidate, step: StepOf, per_epoch: bool) -> None:
        """Work the chain out to its end (asking ``c``'s models) and lay out what ``walk``
        reads; kept only once whole, so a model that fails half-way leaves it as it was.

        A chain is kept per candidate curve, sizes and measured or not, so its
        keys (``-score``, or minus infinity for a job not yet measured: those
        grow first, in order) are the same wherever it is walked.
        """
        steps: list[Entry] = []
        leads: list[float] = []
        size = self.start
        sizes = [size]
        runs: list[tuple[float, int]] = []
        lead = -math.inf
        while True:
            entry, end = weigh(c, size, step, per_epoch)
            if entry is None:
                break
            add, score = entry[1], entry[4]
            lead = max(lead, -score if c.measured else -math.inf)
            if runs and runs[-1][0] == lead:
                runs[-1] = (lead, runs[-1][1] + add)
            else:
                runs.append((lead, add))
            steps.append(entry)
            leads.append(lead)
            size += add
            sizes.append(size)
        self.steps, self.end, self.leads, self.sizes, self.runs = steps, end, leads, sizes, runs
        self.adds = [entry[1] for entry in steps]


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
        self._by_job: dict[str, _Last] = {}
        """Each job's last candidate and size with their chain: the same candidate object
        (``profiling.LastCandidates``) from the same size has the same chain."""
        self.limit = limit

    def of(self, c: Candidate, workers: int) -> Chain:
        job = c.job
        hit = self._by_job.get(job.id)
        if hit is not None and hit.candidate is c and hit.workers == workers:
            return hit.chain
        key = (c.solo, workers, job.max_gpus, 0 if c.measured else start_size(job))
        chain = self._chains.get(key)
        if chain is None:
            if len(self._chains) >= self.limit or len(self._by_job) >= self.limit:
                self._chains.clear()
                self._by_job.clear()
            chain = self._chains[key] = Chain(workers)
        self._by_job[job.id] = _Last(c, workers, chain)
        return chain


class _Last:
    """A job's last candidate and size, with their chain (a class, not a tuple: see
    ``Chain.adds``)."""

    __slots__ = ("candidate", "chain", "workers")

    def __init__(self, candidate: Candidate, workers: int, chain: Chain) -> None:
        self.candidate = candidate
        self.workers = workers
        self.chain = chain


Later = Callable[[], dict[str, Note]]
"""Notes worked out when first asked for (``plan.SizingNotes``)."""


def walk(
    jobs: list[Candidate],
    of: list[Chain],
    free: int,
    step: StepOf,
    per_epoch: bool,
    out: Counts,
    scales: list[float] | None = None,
) -> Later:
    """Grow ``jobs`` (each from the start of its chain ``of[i]``) as the greedy would.

    Writes each job's size into ``out``. Returns where each job's growth
    stopped (its chain's end, a grow that would not pay, or outbid for the
    GPUs left), worked out only if asked: most decisions' notes never are.
    ``scales``: each job's objective and scores are its chain's times this
    (``growth.greedy``'s ``scaled``; each above 0).
    """
    n = len(jobs)
    ends = [0] * n
    """How many of its chain's steps each job may take: up to a grow that does not pay."""
    refused: dict[int, Note] = {}
    """The note of each job's grow that does not pay, written now: it reads the job's
    progress, which the body moves on in place after the decision."""
    total = 0
    for i in range(n):
        c, chain = jobs[i], of[i]
        if chain.runs is None:
            chain.lay_out(c, step, per_epoch)
        sizes = chain.sizes
        t = len(chain.adds)
        now = c.job.workers
        if sizes[-1] > now and may_refuse(c):
            for k in range(t):
                if sizes[k + 1] > now and not pays(c, sizes[k + 1]):
                    t = k
                    w, add, before, after, _ = chain.steps[k]
                    if scales is not None:
                        before, after = scales[i] * before, scales[i] * after
                    refused[i] = not_won(c, w, add, before, after, per_epoch)
                    break
        ends[i] = t
        total += chain.sizes[t] - chain.start
    if total <= free:
        # Everything fits: no step is dropped, and the order they are taken in is moot.
        for i in range(n):
            out[jobs[i].job.id] = of[i].sizes[ends[i]]
        return _Notes(jobs, of, ends, ends, [], refused, per_epoch, scales)

    # A scale above 0 keeps a chain's leads in order and equal ones equal: its leads
    # scaled are the leads of its steps' scores scaled, to the bit.
    led: list[list[float]] = [of[i].leads for i in range(n)]
    if scales is not None:
        led = [[scales[i] * lead for lead in led[i]] for i in range(n)]
    levels: dict[float, int] = {}
    for i in range(n):
        chain, t = of[i], ends[i]
        runs = chain.runs
        if t == len(chain.adds) and runs is not None:
            scale = 1.0 if scales is None else scales[i]
            for lead, gpus in runs:
                lead = scale * lead
                levels[lead] = levels.get(lead, 0) + gpus
        else:
            leads, adds = led[i], chain.adds
            for k in range(t):
                lead = leads[k]
                levels[lead] = levels.get(lead, 0) + adds[k]
    left = free
    cut = math.inf
    for lead in sorted(levels):
        gpus = levels[lead]
        if gpus > left:
            cut = lead
            break
        left -= gpus

    # Every step led by better than the cut is taken; the cut's own steps come in the
    # jobs' order, each taken while it fits; the rest wait in the heap.
    heap: list[tuple[float, int, int]] = []
    taken = [0] * n
    dropped: list[tuple[int, int]] = []
    """Jobs whose next step did not fit the GPUs left: (job index, GPUs left)."""
    for i in range(n):
        chain, t = of[i], ends[i]
        leads = led[i]
        k = bisect_left(leads, cut, 0, t)
        while k < t and leads[k] == cut:
            add = chain.adds[k]
            if add > left:
                dropped.append((i, left))
                t = -1  # dropped: nothing more for it
                break
            left -= add
            k += 1
        taken[i] = k
        out[jobs[i].job.id] = chain.sizes[k]
        if k < t:
            heap.append((leads[k], i, k))
    waiting: dict[int, int] = {}
    """How many steps in the heap add each number of GPUs."""
    for _, i, k in heap if left > 0 else ():
        add = of[i].adds[k]
        waiting[add] = waiting.get(add, 0) + 1
    heapq.heapify(heap)  # keys are unique (by index): pops come in the greedy's order
    while heap and left > 0:
        _, i, k = heap[0]
        chain = of[i]
        add = chain.adds[k]
        waiting[add] -= 1
        if add > left:
            if all(a > left for a, m in waiting.items() if m):
                waiting[add] += 1
                break  # no step left fits: each is outbid with the GPUs left, as if dropped
            dropped.append((i, left))
            heapq.heappop(heap)
            continue
        left -= add
        k += 1
        taken[i] = k
        out[jobs[i].job.id] = chain.sizes[k]
        if k == ends[i]:
            heapq.heappop(heap)
        else:
            heapq.heapreplace(heap, (led[i][k], i, k))
            add = chain.adds[k]
            waiting[add] = waiting.get(add, 0) + 1
    dropped.extend((e[1], left) for e in heap)
    return _Notes(jobs, of, ends, taken, dropped, refused, per_epoch, scales)


class _Notes:
    """Where each job walked stopped, as ``plan.Sizing`` notes: worked out when called."""

    __slots__ = ("dropped", "ends", "jobs", "of", "per_epoch", "refused", "scales", "taken")

    def __init__(
        self,
        jobs: Sequence[Candidate],
        of: Sequence[Chain],
        ends: list[int],
        taken: list[int],
        dropped: list[tuple[int, int]],
        refused: dict[int, Note],
        per_epoch: bool,
        scales: list[float] | None,
    ) -> None:
        self.jobs = jobs
        self.of = of
        self.ends = ends
        self.taken = taken
        self.dropped = dropped
        """Jobs outbid for the GPUs left: (job index, GPUs left when its step was weighed)."""
        self.refused = refused
        self.per_epoch = per_epoch
        self.scales = scales

    def __call__(self) -> dict[str, Note]:
        jobs, of, ends, taken, per_epoch = self.jobs, self.of, self.ends, self.taken, self.per_epoch
        notes: dict[str, Note] = {}
        bar: float | None = None
        """The lowest score of a step taken by a measured job: its lead, negated."""
        scales = self.scales
        for i in range(len(jobs)):
            c, chain, k = jobs[i], of[i], taken[i]
            if k and c.measured:
                worst = -chain.leads[k - 1] if scales is None else -(scales[i] * chain.leads[k - 1])
                bar = worst if bar is None else min(bar, worst)
            if k < ends[i]:
                continue  # outbid: below
            if k < len(chain.steps):
                notes[c.job.id] = self.refused[i]
            else:
                assert chain.end is not None  # laid out: worked out to its end
                notes[c.job.id] = chain.end if scales is None else scale_note(chain.end, scales[i])
        for i, gpus in self.dropped:
            c = jobs[i]
            entry = of[i].steps[taken[i]]
            if scales is not None:
                entry = scaled_entry(entry, scales[i])
            notes[c.job.id] = outbid(c, entry, per_epoch, gpus, bar)
        return notes


def scaled_entry(entry: Entry, scale: float) -> Entry:
    """A step of a chain laid out per unit of work (``growth.greedy``'s ``scaled``), for a
    job with ``scale`` of it left: its objectives and score times ``scale``."""
    w, add, before, after, score = entry
    return w, add, scale * before, scale * after, scale * score


def scale_note(note: Note, scale: float) -> Note:
    """A note of a chain laid out per unit of work, with its objectives (``Sizing``'s
    ``before_s`` and ``after_s``, where it has them) times ``scale``."""
    if len(note) < 5 or note[3] is None:
        return note
    return (*note[:3], scale * note[3], scale * note[4], *note[5:])


NONE3 = (None,) * 3
NONE5 = (None,) * 5
