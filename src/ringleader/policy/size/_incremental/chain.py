"""A job's growth steps from one size as a chain, worked out whole once.

A job's steps from a size form a chain: each step is taken only after the one
before it, and the chain stops where the job is at its maximum, a step gains
nothing, or a job not yet measured reaches the size it asked to start at.
``chains.Chains`` keeps them across decisions; ``walk`` and ``batched`` read
what ``Chain.lay_out`` lays out.
"""

from __future__ import annotations

import math

from ringleader.policy.model.objective import Candidate
from ringleader.policy.model.plan import Note
from ringleader.policy.size.steps import Entry, StepOf, weigh


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
        the step: docs/scale.md, "The compiled hot path")."""
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
