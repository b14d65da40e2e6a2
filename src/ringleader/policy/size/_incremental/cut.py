"""Where the GPUs run out in a walk over kept chains: the cut, and where to look for it.

The walk (``ringleader.policy.size._incremental.walk``) takes every step led by better than
the *cut*: the lowest lead whose steps, with every better-led step, need
more GPUs than are free. Finding it sorts the steps by lead.

From one decision to the next the cut barely moves: an event frees or
takes a few GPUs, and progress moves every lead a little. So ``Window``
keeps where the last large walk's cut fell, and the next walk sorts only
the steps led near it, summing the GPUs of those led below without sorting
them. That is exact, not a guess: where those below fit the GPUs free and
the cut falls among those near, it is the cut of all the steps (see
``Window``); where it does not, the walk sorts them all, as without a
window, and the window is set around the cut found.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from ringleader.policy.size._incremental.chain import Chain

SORTED_FROM = 1024
"""Steps from which ``cut_level`` sorts them in numpy, not in a list: below about 1,000
a list costs what numpy does (docs/scale.md, "The cut window")."""

REACH = 1 / 16
"""A window holds about this share of the steps on each side of the cut, when set."""


def cut_level(leads: list[float], gpus: list[int], free: int) -> tuple[float, int]:
    """The lowest lead whose steps, with every step led by better, need more than ``free``
    GPUs (``inf`` where none does), and the GPUs left once those better-led steps are
    taken. ``leads[j]`` is a step's (or a run of steps') lead and ``gpus[j]`` its GPUs.

    Both ways sort the steps by lead and sum their GPUs in that order: the first step
    whose running sum passes ``free`` has the cut's lead, as the steps of one lead lie
    together (integer sums, and floats only compared: exact). From ``SORTED_FROM``
    steps in numpy, below that in a list. Either replaced summing the GPUs per lead in
    a dictionary and sorting its keys, which hashed a float per step.
    """
    if len(leads) >= SORTED_FROM:
        return _cut_sorted(leads, gpus, free)
    return _cut_ordered(leads, gpus, free)


def _cut_ordered(leads: list[float], gpus: list[int], free: int) -> tuple[float, int]:
    """``cut_level`` over the steps' indices sorted by lead, summing as it goes."""
    left = free
    at_level = free
    """The GPUs left before the first step of the lead being summed."""
    level = math.nan  # equal to no lead: the first step starts a level
    for j in sorted(range(len(leads)), key=leads.__getitem__):
        lead = leads[j]
        if lead != level:
            level = lead
            at_level = left
        g = gpus[j]
        if g > left:
            return lead, at_level
        left -= g
    return math.inf, left


def _cut_sorted(leads: list[float], gpus: list[int], free: int) -> tuple[float, int]:
    """``cut_level`` in numpy: the steps sorted by lead, their GPUs summed in that order."""
    cut, left, _, _ = _sorted_cut(leads, gpus, free, 0)
    return cut, left


def _sorted_cut(
    leads: list[float], gpus: list[int], free: int, reach: int
) -> tuple[float, int, float, float]:
    """``_cut_sorted``, and the lowest and highest lead of a window of about ``reach``
    steps either side of the cut's level, ending short of any lead it would cut through
    (NaN for ``reach`` 0)."""
    by_lead = np.array(leads, dtype=np.float64)
    order = np.argsort(by_lead)
    sorted_leads = by_lead[order]
    summed = np.cumsum(np.array(gpus, dtype=np.int64)[order])
    j = int(np.searchsorted(summed, free, side="right"))
    if j == len(summed):
        left = (free - int(summed[-1])) if j else free
        return math.inf, left, math.nan, math.nan
    cut = float(sorted_leads[j])
    first = int(np.searchsorted(sorted_leads, cut, side="left"))
    left = (free - int(summed[first - 1])) if first else free
    if not reach:
        return cut, left, math.nan, math.nan  # no window asked for (``_cut_sorted``)
    last = int(np.searchsorted(sorted_leads, cut, side="right")) - 1
    # The window ends between leads, not on one: many steps may share a lead (jobs of
    # one model, per epoch, lead alike), and a window ending on it would sort them all;
    # so does minus infinity (the jobs not yet measured, which grow first).
    low = sorted_leads[max(first - reach, 0)]
    low = float(sorted_leads[min(int(np.searchsorted(sorted_leads, low, side="right")), first)])
    high = sorted_leads[min(last + reach, len(summed) - 1)]
    high = float(sorted_leads[max(int(np.searchsorted(sorted_leads, high, side="left")) - 1, last)])
    return cut, left, low, high


class Window:
    """Where the last large walk's cut fell, and how far around it to look first.

    ``bounds()`` gives the leads ``lo`` and ``hi`` a walk looks between: it
    sums the GPUs of every step led below ``lo`` (without sorting them) and
    finds the cut among the steps from ``lo`` to ``hi`` (``cut_level`` with
    the GPUs free less that sum). Where the steps below need no more than
    the GPUs free and a cut is found there, it is the cut of all the steps:
    every step below ``lo`` is led by better than any there, every step
    above ``hi`` by worse, so each lead from ``lo`` to ``hi`` has the same
    steps led by better, and the same GPUs left, as among all the steps.
    Otherwise (``Levels.cut`` gives NaN) the walk sorts all its steps and
    ``learn`` sets the window around the cut they give.

    The window is kept in leads, as distances below and above the cut: the
    next walk's leads have moved (the jobs' progress scales them), its cut
    with them, and about as many steps lie within those distances of it.
    ``found`` moves the window to a cut found within it. Only walks of at
    least ``from_steps`` steps set a window: below that, sorting them all
    costs about what looking near the cut does.
    """

    __slots__ = ("above", "at", "below", "found_within", "from_steps", "reach", "sorted_all")

    def __init__(self, from_steps: int = SORTED_FROM, reach: float = REACH) -> None:
        self.from_steps = from_steps
        self.reach = reach
        self.at = math.nan
        """The last cut (NaN: none known: look everywhere)."""
        self.below = 0.0
        self.above = 0.0
        """How far below and above ``at`` to look."""
        self.found_within = 0
        self.sorted_all = 0
        """How many cuts were found within the window, and how many walks of at least
        ``from_steps`` steps sorted them all: what a benchmark reports of it."""

    def bounds(self) -> tuple[float, float]:
        """The leads to look between: everywhere while no cut is known."""
        at = self.at
        if at != at:
            return -math.inf, math.inf
        return at - self.below, at + self.above

    def found(self, cut: float) -> None:
        """The walk found ``cut`` within the window: look around it next time."""
        self.at = cut
        self.found_within += 1

    def learn(self, leads: list[float], gpus: list[int], free: int) -> tuple[float, int]:
        """``cut_level`` of all the steps, and the window set around it (or forgotten,
        where there are too few steps, or the cut or its neighbours are not finite)."""
        if len(leads) < self.from_steps:
            self.at = math.nan
            return cut_level(leads, gpus, free)
        self.sorted_all += 1
        reach = max(int(len(leads) * self.reach), 1)
        cut, left, low, high = _sorted_cut(leads, gpus, free, reach)
        below, above = cut - low, high - cut
        if math.isfinite(below) and math.isfinite(above):
            self.at, self.below, self.above = cut, below, above
        else:
            self.at = math.nan
        return cut, left


class Levels:
    """The steps a walk (``walk``) looks for its cut among: those led
    from ``lo`` to ``hi`` (``Window.bounds``), as (lead, GPUs) in two lists, a chain
    taken whole by its runs, else step by step; with the GPUs of the steps led below
    ``lo`` and how many are led above ``hi``. A window of one lead (``lo == hi``: per
    epoch, thousands of jobs' steps share the lead the cut falls on) keeps only the
    GPUs of its steps: they need no sorting."""

    __slots__ = ("below", "beyond", "gpus", "hi", "leads", "lo", "one", "within")

    def __init__(self, lo: float, hi: float) -> None:
        self.lo = lo
        self.hi = hi
        self.one = lo == hi
        self.leads: list[float] = []
        self.gpus: list[int] = []
        self.below = 0
        self.beyond = 0
        self.within = 0
        """The GPUs of the steps led from ``lo`` to ``hi``."""

    def gather(self, chain: Chain, leads: list[float], t: int, by_runs: bool) -> None:
        """The first ``t`` steps of ``chain``, led by ``leads``; by its runs where ``t``
        is the whole chain and ``by_runs`` (its leads are the chain's own)."""
        runs = chain.runs
        if by_runs and t == len(chain.adds) and runs is not None:
            for lead, gpus in runs:
                self._step(lead, gpus)
            return
        adds = chain.adds
        for k in range(t):
            self._step(leads[k], adds[k])

    def gather_arrays(self, leads: npt.NDArray[np.float64], gpus: npt.NDArray[np.int64]) -> None:
        """Steps led by ``leads`` adding ``gpus``, as arrays (``batched``): ``_step`` for
        each, in array operations."""
        below = leads < self.lo
        above = leads > self.hi
        within = ~(below | above)
        self.below += int(gpus[below].sum())
        self.beyond += int(np.count_nonzero(above))
        self.within += int(gpus[within].sum())
        if not self.one:
            self.leads += leads[within].tolist()
            self.gpus += gpus[within].tolist()

    def _step(self, lead: float, gpus: int) -> None:
        if lead < self.lo:
            self.below += gpus
        elif lead > self.hi:
            self.beyond += 1
        else:
            self.within += gpus
            if not self.one:
                self.leads.append(lead)
                self.gpus.append(gpus)

    def cut(self, free: int) -> tuple[float, int]:
        """The cut of every step and the GPUs left before its level, where it falls among
        those gathered (``cut.Window``); NaN where it does not."""
        free -= self.below
        if free < 0 or (self.within <= free and self.beyond):
            return math.nan, 0  # below the window, or above it
        if self.one:
            return (self.lo, free) if self.within > free else (math.inf, free - self.within)
        return cut_level(self.leads, self.gpus, free)
