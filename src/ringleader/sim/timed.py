"""A policy whose every decision is timed: how long deciding takes inside a simulation."""

from __future__ import annotations

import time
from collections.abc import Sequence

from ringleader.policy.model.needs import Needs
from ringleader.policy.model.plan import Decider, Plan
from ringleader.policy.model.views import ClusterView, JobView


class Timed:
    """``policy``, each decision's seconds kept in ``seconds`` (for decision-time goals)."""

    def __init__(self, policy: Decider) -> None:
        self.policy = policy
        self.seconds: list[float] = []

    @property
    def name(self) -> str:
        return self.policy.name

    @property
    def needs(self) -> Needs:
        return self.policy.needs

    def decide(self, jobs: Sequence[JobView], cluster: ClusterView, now: float) -> Plan:
        started = time.perf_counter()
        plan = self.policy.decide(jobs, cluster, now)
        self.seconds.append(time.perf_counter() - started)
        return plan

    def quantile_ms(self, q: float) -> float:
        """The ``q`` quantile of the decisions' times, in milliseconds (0: none)."""
        if not self.seconds:
            return 0.0
        ordered = sorted(self.seconds)
        return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]
