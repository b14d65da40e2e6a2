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

from typing import cast

from ringleader.policy.model.objective import Candidate, SoloCurve
from ringleader.policy.size._incremental.chain import Chain
from ringleader.policy.size._incremental.cut import Window
from ringleader.policy.size._incremental.flat import Flat
from ringleader.policy.size.steps import start_size

BATCHED_FROM = 2048
"""Jobs given to a greedy over kept chains from which its walk works in numpy
(``ringleader.policy.size._incremental.batched``)."""


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
        # with no look-up by job id and no object between them to fetch from memory.
        if c.chain_by is self:
            kept = cast(Chain, c.chain)
            if kept.start == workers:
                return kept
        job = c.job
        key = (c.solo, workers, job.max_gpus, 0 if c.measured else start_size(job))
        chain = self._chains.get(key)
        if chain is None:
            if len(self._chains) >= self.limit:
                self._chains.clear()
            chain = self._chains[key] = Chain(workers)
        c.chain, c.chain_by = chain, self
        return chain
