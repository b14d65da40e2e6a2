"""Kept chains' steps laid end to end in arrays, for a walk that works in numpy.

A large walk (``ringleader.policy.size._incremental.batched``) reads every job's steps at
every decision, and, scaled, scales them by its work left: a step at a time in a
loop, but in numpy a gather and a few array operations, if the steps are in arrays
(docs/scale.md, "The walk in numpy for thousands of jobs"). A chain is kept from
one decision to the next (``chains.Chains``), so its steps are copied into these
arrays once, when a walk first meets it, and found again by offset.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from ringleader.policy.model.objective import Candidate
    from ringleader.policy.size._incremental.chain import Chain

Item = TypeVar("Item", bound=np.generic)

LIMIT = 1 << 19
"""Steps the arrays hold before they start again empty: 524,288, 4 MB in each of the six
(a decision at 50,000 jobs walks about 120,000 steps, of chains mostly filed before)."""


class Flat:
    """Each filed chain's steps, at ``chain.at`` onward: the GPUs each adds, its
    objectives before and after, the size after it, its lead (the chain's own), and the
    whole job's seconds after it.

    A chain is filed under the arrays' generation (``chain.filed``): when the
    arrays fill up they start again, a new generation, and every chain is
    filed again when next met. So nothing is ever removed one chain at a time.
    """

    __slots__ = (
        "adds",
        "afters",
        "befores",
        "generation",
        "leads",
        "limit",
        "sizes",
        "used",
        "wholes",
    )

    def __init__(self, limit: int = LIMIT) -> None:
        self.limit = limit
        self.generation = 1
        self.used = 0
        start = max(min(limit, 1024), 1)
        self.adds: npt.NDArray[np.int64] = np.zeros(start, dtype=np.int64)
        self.befores: npt.NDArray[np.float64] = np.zeros(start, dtype=np.float64)
        self.afters: npt.NDArray[np.float64] = np.zeros(start, dtype=np.float64)
        self.sizes: npt.NDArray[np.int64] = np.zeros(start, dtype=np.int64)
        """``sizes[chain.at + k]``: the job's size once step ``k`` is taken."""
        self.leads: npt.NDArray[np.float64] = np.zeros(start, dtype=np.float64)
        """The chain's own leads (``Chain.leads``), for a walk that does not scale them."""
        self.wholes: npt.NDArray[np.float64] = np.zeros(start, dtype=np.float64)
        """The whole job's seconds once the step is taken (``Candidate.whole_seconds``),
        which ``payback`` weighs times the share of its work left."""

    def at(self, chain: Chain, c: Candidate | None) -> object:
        """Where ``chain``'s steps start in the arrays (an int, boxed: ``Chain.at``),
        filing them first if need be (``file``)."""
        if chain.filed == self.generation:
            return chain.at
        if self.used + len(chain.adds) > self.limit:
            self.start_again()
        return self.file(chain, c)

    def start_again(self) -> None:
        """Empty the arrays: a new generation, in which every chain is filed again."""
        self.generation += 1
        self.used = 0

    def file(self, chain: Chain, c: Candidate | None) -> int:
        """File ``chain``'s steps at the end of the arrays (past ``limit`` if need be: a
        walk whose own steps are more than it holds) and give where they start. ``c``:
        a job along it, whose model gives the whole job's seconds after each step, for a
        chain whose objectives are not those (per epoch); None where they are (a chain
        per unit of work: the objective after each step)."""
        m = len(chain.adds)
        if self.used + m > len(self.adds):
            self._grow(self.used + m)
        at = self.used
        self.adds[at : at + m] = chain.adds
        self.befores[at : at + m] = chain.befores
        self.afters[at : at + m] = chain.afters
        self.sizes[at : at + m] = chain.sizes[1:]
        self.leads[at : at + m] = chain.leads
        if c is None:
            self.wholes[at : at + m] = chain.afters
        else:
            self.wholes[at : at + m] = [c.whole_seconds(size) for size in chain.sizes[1:]]
        self.used = at + m
        chain.at = at
        chain.filed = self.generation
        return at

    def _grow(self, need: int) -> None:
        size = len(self.adds)
        while size < need:
            size *= 2
        self.adds = _resized(self.adds, size)
        self.befores = _resized(self.befores, size)
        self.afters = _resized(self.afters, size)
        self.sizes = _resized(self.sizes, size)
        self.leads = _resized(self.leads, size)
        self.wholes = _resized(self.wholes, size)


def _resized(a: npt.NDArray[Item], size: int) -> npt.NDArray[Item]:
    grown = np.zeros(size, dtype=a.dtype)
    grown[: len(a)] = a
    return grown
