"""Finish-time fairness (Themis, NSDI'20; as Gavel, OSDI'20 §4.2, and Sia run it).

A job's finish-time fairness is ``ρ = T_shared / T_isolated``: how long it will
have taken in the shared cluster over how long it would take alone on ``1/N``
of it, ``N`` the jobs in the system. A job that asks for more than its ``1/N``
share runs alone at that share's pace (``g · N / C`` times slower); one that
asks for less runs at its own size.

Gavel chooses each job's fraction of time ``X`` to minimise the largest
``ρ(X) = (t + R / X) / T_isolated`` (``t``: time in the system so far, ``R``:
time left at its size) under the cluster's capacity ``Σ g · X ≤ C``, ``X ≤ 1``.
``ρ(X) ≤ ρ`` is ``X ≥ R / (ρ · T_isolated − t)``, so the smallest feasible
``ρ`` is found by bisection, and the fractions with it. Gavel then serves, every
round (6 minutes), the jobs furthest below their fraction first: ``order``
sorts by the fraction over the share of time received when the round began,
highest first, and the size
stage gives each its requested GPUs in that order (with backfill), so a job
that got its fraction yields to one that did not at the next round.

It reads each job's remaining time at its size, so like Gavel it knows
durations: an oracle in ringleader's terms, a simulator's baseline.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ringleader.policy.model.objective import Candidate
from ringleader.policy.model.views import JobView

ROUND_S = 360.0
"""Gavel's round: the order is worked out as of each round's start, so within a round
nobody overtakes a job for the time it has run in it (no restart every decision)."""
BISECTIONS = 60
"""Halvings of the ``ρ`` interval: far below a second of any job's finish time."""


@dataclass(frozen=True, slots=True)
class FinishTimeFair:
    """Gavel's finish-time fairness: see the module docstring.

    The fractions need the GPUs shared: the pipeline hands them to an order stage
    through ``order_and_shares`` (``UserShares``); this one bounds no user, so it
    returns no shares. Called as a plain ``order``, it shares the jobs' requests.
    """

    round_s: float = ROUND_S
    needs_speed: bool = True
    needs_true_remaining: bool = True

    @property
    def bounds_users(self) -> bool:
        return True  # to be told the capacity (``order_and_shares``); no share is set

    def order_and_shares(
        self, jobs: Sequence[Candidate], now: float, capacity: int
    ) -> tuple[list[Candidate], dict[str, int]]:
        return self._order(jobs, now, capacity), {}

    def order(self, jobs: Sequence[Candidate], now: float) -> list[Candidate]:
        return self._order(jobs, now, 0)

    def _order(self, jobs: Sequence[Candidate], now: float, capacity: int) -> list[Candidate]:
        if len(jobs) < 2:
            return list(jobs)
        start = math.floor(now / self.round_s) * self.round_s
        fractions = self.fractions(jobs, start, capacity)
        return [jobs[i] for i in most_owed([c.job for c in jobs], fractions, now, start)]

    def fractions(self, jobs: Sequence[Candidate], now: float, capacity: int) -> list[float]:
        """Each job's fraction of time to run at its size, minimising the largest ``ρ``
        (``capacity``: the GPUs shared; 0: the jobs' requests, all met)."""
        gpus = np.asarray([max(1, c.job.requested_gpus) for c in jobs], dtype=float)
        shared = float(capacity or gpus.sum())
        share = shared / len(jobs)
        left = np.asarray([c.remaining_seconds(c.job.requested_gpus) for c in jobs])
        whole = np.asarray([c.whole_seconds(c.job.requested_gpus) for c in jobs])
        isolated = whole * np.maximum(1.0, gpus / share)
        waited = np.asarray([max(0.0, now - c.job.submitted_at) for c in jobs])
        # At rho_high every job fits running all the time; at rho_low none could.
        low = float(np.max(waited / isolated))
        high = float(np.max((waited + left) / isolated)) * 2 + 1
        need = np.ones(len(jobs))
        for _ in range(BISECTIONS):
            rho = (low + high) / 2
            slack = rho * isolated - waited
            with np.errstate(divide="ignore"):
                x = np.where(slack > 0, left / np.maximum(slack, 1e-12), math.inf)
            if np.all(x <= 1) and float(np.dot(gpus, x)) <= shared:
                high, need = rho, x
            else:
                low = rho
        return [float(v) for v in need]


def most_owed(
    jobs: Sequence[JobView], fractions: Sequence[float], now: float, start: float
) -> list[int]:
    """Indices of ``jobs`` furthest below their fraction of time first: Gavel's round
    priority, each fraction over the share of time ``received`` as of the round's
    ``start``; ties in submission order (also ``allot.max_min``)."""
    keys = [x / max(received(j, now, start), 1e-9) for x, j in zip(fractions, jobs, strict=True)]
    return sorted(range(len(jobs)), key=lambda i: (-keys[i], jobs[i].submitted_at, jobs[i].id))


def received(job: JobView, now: float, start: float) -> float:
    """The share of its time in the system a job had run at its size when the round
    began at ``start`` (its GPU-seconds since then taken back off): what Gavel's rounds
    weigh a job's share against."""
    age = start - job.submitted_at
    if age <= 0:
        return 0.0
    attained = job.attained_gpu_s
    if job.running:
        attained -= job.workers * (now - max(start, job.state_since))
    return max(0.0, attained) / max(1, job.requested_gpus) / age
