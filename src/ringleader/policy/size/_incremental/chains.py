"""A job's growth steps as a chain, kept across decisions.

A job's steps from a size form a chain: each step is taken only after the
one before it, and the chain stops where the job is at its maximum, a step
gains nothing, or a job not yet measured reaches the size it asked to start
at. Where the step stage's objective reads no progress (per epoch), or reads
it only as one factor per job (remaining seconds are the work left times the
seconds per unit of work: ``growth.greedy``'s ``scaled``), a chain depends
only on the job's speed model and sizes, so it is kept from one decision to
the next (``Chains``) instead of asking the models again.

The greedy (``ringleader.policy.size.growth``) walks kept chains with
``ringleader.policy.size._incremental.walk``.
"""

from __future__ import annotations

import math
from typing import Protocol

from ringleader.policy.model.objective import Candidate, SoloCurve
from ringleader.policy.model.plan import AT_MAX, NO_GAIN, OUTBID, RESTART_NOT_WON, UNMEASURED, Note
from ringleader.policy.model.views import JobView
from ringleader.policy.size._incremental.cut import Window
from ringleader.policy.size._incremental.flat import Flat
from ringleader.policy.size.payback import saved_by

Counts = dict[str, int]

BATCHED_FROM = 2048
"""Jobs given to a greedy over kept chains from which its walk works in numpy
(``ringleader.policy.size._incremental.batched``)."""

NONE3 = (None,) * 3
NONE5 = (None,) * 5

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
        return None, at_max(c, w, per_epoch)
    add, before, after = nxt
    if not c.measured and w + add > start_size(c.job):
        # Not measured yet: no bigger than the size it asked to start at.
        return None, (UNMEASURED, w, w + add, before, after, per_epoch, *NONE5, False)
    score = (before - after) / add
    if not score > 0:  # no gain, or none to speak of (NaN: an objective of inf at both sizes)
        return None, no_gain(c, w, add, before, after, per_epoch)
    return (w, add, before, after, score), None


def at_max(c: Candidate, w: int, per_epoch: bool) -> Note:
    """The note of a job at ``w`` workers with no step left: at its maximum."""
    return (AT_MAX, w, None, None, None, per_epoch, *NONE3, c.job.max_gpus)


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

    __slots__ = (
        "adds",
        "afters",
        "at",
        "befores",
        "count",
        "end",
        "filed",
        "leads",
        "runs",
        "sizes",
        "start",
        "steps",
        "top",
    )

    def __init__(self, workers: int) -> None:
        self.start = workers
        self.count = 0
        self.top = workers
        """How many steps it has, and the size after the last (``len(adds)`` and
        ``sizes[-1]``, read from the chain itself: a walk in numpy reads them for every
        job, where the lists are another two objects to fetch from memory)."""
        self.at: object = 0
        self.filed = 0
        """Where its steps start in a ``flat.Flat`` (an int, kept boxed: a walk in numpy
        lists it for every row, where a native int is boxed anew, an allocation per row
        per decision), and under which of its generations they were filed there (0:
        never)."""
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
        self.befores: list[float] = []
        self.afters: list[float] = []
        """Each step's objectives before and after it (``steps[k][2]`` and ``[3]``), as
        ``adds``: a walk that scales them (``walk._scaled``) reads two floats per step
        instead of unpacking and building a tuple per step."""

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
        self.befores = [entry[2] for entry in steps]
        self.afters = [entry[3] for entry in steps]
        self.count, self.top = len(steps), size


class Chains:
    """The chains of a step stage whose steps read no progress, kept across decisions.

    A chain is a function of the candidate's memoised curve (its speed model
    and epochs), its maximum, whether it is measured and, if not, its start
    size, and the size it starts from: a decision asks for the same few, so
    it finds them here instead of asking the models step by step. Cleared
    when it holds ``limit`` chains, so it stays bounded.
    """

    __slots__ = ("_chains", "batched_from", "flat", "limit", "window")

    def __init__(self, limit: int = 1 << 17, batched_from: int = BATCHED_FROM) -> None:
        self._chains: dict[tuple[SoloCurve | None, int, int, int], Chain] = {}
        self.limit = limit
        self.window = Window()
        """Where the last large walk over these chains found its cut (``cut.Window``)."""
        self.flat = Flat()
        """Their steps in arrays, for a walk that works in numpy (``batched``)."""
        self.batched_from = batched_from
        """Jobs from which a walk over these chains works in numpy (``batched``)."""

    def of(self, c: Candidate, workers: int) -> Chain:
        # The same candidate object (``profiling.LastCandidates``) from the same size
        # has the same chain: it is kept on the candidate (``Candidate.chain``), found
        # with no look-up by job id (a tenth of the greedy's loop at 50,000 jobs), and
        # with no object between them to fetch from memory.
        chain = c.chain
        if chain is not None and c.chain_by is self and chain.start == workers:
            return chain
        job = c.job
        key = (c.solo, workers, job.max_gpus, 0 if c.measured else start_size(job))
        chain = self._chains.get(key)
        if chain is None:
            if len(self._chains) >= self.limit:
                self._chains.clear()
            chain = self._chains[key] = Chain(workers)
        c.chain, c.chain_by = chain, self
        return chain
