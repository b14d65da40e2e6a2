"""How much a job's speed-up weighs, by how long it has left: which job a GPU ends first.

The default's goodput objective gives GPUs where ``Σ weight_j · speedup_j`` is
largest. The weight says how much sooner ending a job is worth than ending
another: a weight that falls with the job's remaining seconds serves the
short jobs first, as shortest-remaining-first does, and the average JCT with
it; a speed-up that is concave in GPUs keeps the long jobs from starving.

Two rules:

* ``RemainingPower(a)``: ``1 / remaining ^ a``. Scale-free only in ratios, so
  how strongly a job leads depends on how far apart the remaining times are.
* ``LongerCount(c)``: ``n_j ^ c``, ``n_j`` the jobs of the decision with at
  least ``j``'s remaining seconds (the longest job 1, the shortest all of
  them). This is heSRPT's rule (Berg, Vesilo and Harchol-Balter, "heSRPT:
  Parallel scheduling to minimize mean slowdown", Performance 2020): for jobs
  whose speed-up is ``k ^ p``, all present, the allocation that minimises the
  mean flow time depends only on each job's rank by remaining size, and
  ``max Σ w_j k_j ^ p`` gives it at ``w_j ∝ n_j ^ p``. Only the order of the
  remaining times counts, which the online model estimates better than their
  ratios. Our speed-ups are measured curves, not powers, so ``c`` is swept
  rather than read off (``docs/pollux.md``).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


class Urgency(Protocol):
    """Each job's weight in the goodput objective, from every job's remaining seconds."""

    def weights(self, remaining: Sequence[float]) -> list[float]:
        """One weight per entry of ``remaining`` (seconds, each > 0), in its order."""
        ...


@dataclass(frozen=True, slots=True)
class RemainingPower:
    """``1 / remaining ^ power``: see the module docstring."""

    power: float

    def weights(self, remaining: Sequence[float]) -> list[float]:
        a = self.power
        return [1.0 / r**a for r in remaining]


@dataclass(frozen=True, slots=True)
class LongerCount:
    """``(jobs with at least this remaining) ^ power``: heSRPT's rank (module docstring)."""

    power: float

    def weights(self, remaining: Sequence[float]) -> list[float]:
        order = sorted(remaining)
        n, c = len(order), self.power
        return [float(n - bisect_left(order, r)) ** c for r in remaining]


SRPT = RemainingPower(1.0)
"""Shortest-remaining-first's weighing: a speed-up over the seconds left."""
