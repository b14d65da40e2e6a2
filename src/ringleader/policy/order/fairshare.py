"""Fair share between users: an order stage that also bounds each user's GPUs.

Each user has a weight (1 unless set). At every decision the GPUs are split
between the users who have jobs by weighted max-min fairness over their
demand (``waterfill``): a user asking for less than an equal share gets all
they ask for, the rest is split between the others by weight. A job's
demand is what it could use: its ``max_gpus`` if elastic, else its request.

``FairShare.order`` interleaves users: it repeatedly serves the user whose
GPUs claimed so far, over their weight, are fewest, taking that user's next
job in the wrapped order, higher ``priority`` first, so priority is honoured
inside a user's share and never buys a user more than it. ``Policy`` then
sizes in two rounds: first every user within their share (jobs past it wait,
growth stops at it), then whatever is left over, to anyone, so GPUs never
idle while someone could use them (``Policy.decide``).

This is the share Kueue's fair sharing and Slurm's fair-share factor aim at,
computed from the snapshot alone: no decayed history, so a user who was
away gets no credit for it, and the policy stays a pure function.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ringleader.policy.model.objective import Candidate
from ringleader.policy.order.queues import Fifo, Prioritised, Wrapping
from ringleader.policy.order.stage import Order


def demand(c: Candidate) -> int:
    """GPUs a job could use: its maximum if elastic, else its request."""
    job = c.job
    return job.max_gpus if job.elastic else job.requested_gpus


def claim(c: Candidate) -> int:
    """GPUs a job needs to run at all: its minimum if elastic, else its request."""
    job = c.job
    return job.min_gpus if job.elastic else job.requested_gpus


def waterfill(
    capacity: int, demands: Mapping[str, int], weights: Mapping[str, float]
) -> dict[str, int]:
    """Weighted max-min fair integer shares of ``capacity``, none above its demand.

    The continuous water level is found first; shares are its floors, and the
    GPUs the floors leave go one each to the largest fractions (ties by name),
    never past a demand. The shares sum to ``min(capacity, sum of demands)``.
    """
    users = sorted(u for u, d in demands.items() if d > 0)
    if sum(demands[u] for u in users) <= capacity:
        return {u: demands[u] for u in users}
    level_users = sorted(users, key=lambda u: (demands[u] / weights[u], u))
    left, weight_left = float(capacity), sum(weights[u] for u in users)
    exact: dict[str, float] = {}
    for i, u in enumerate(level_users):
        level = left / weight_left
        if demands[u] <= level * weights[u]:
            exact[u] = float(demands[u])
            left -= demands[u]
            weight_left -= weights[u]
            continue
        for v in level_users[i:]:
            exact[v] = level * weights[v]
        break
    shares = {u: min(demands[u], math.floor(exact[u] + 1e-9)) for u in users}
    spare = capacity - sum(shares.values())
    by_fraction = sorted(users, key=lambda u: (-(exact[u] - shares[u]), u))
    for u in by_fraction:
        if spare <= 0:
            break
        if shares[u] < demands[u]:
            shares[u] += 1
            spare -= 1
    return shares


@dataclass(frozen=True, slots=True)
class FairShare(Wrapping):
    """Weighted fair share between users around an inner order (see the module docstring)."""

    @property
    def bounds_users(self) -> bool:
        return True

    within: Order = field(default_factory=Fifo)
    weights: tuple[tuple[str, float], ...] = ()
    """``(user, weight)`` pairs; a user not named weighs ``default_weight``."""
    default_weight: float = 1.0

    def __post_init__(self) -> None:
        for user, weight in (*self.weights, ("(default)", self.default_weight)):
            if not (math.isfinite(weight) and weight > 0):
                raise ValueError(f"weight of user {user!r} must be a positive number, got {weight}")

    def weight(self, user: str) -> float:
        for name, weight in self.weights:
            if name == user:
                return weight
        return self.default_weight

    def shares(self, jobs: Sequence[Candidate], capacity: int) -> dict[str, int]:
        """Each user's fair share of ``capacity`` GPUs, for the jobs given."""
        return self._waterfill(capacity, _demands(jobs))

    def order(self, jobs: Sequence[Candidate], now: float) -> list[Candidate]:
        return self._order(jobs, now)[0]

    def order_and_shares(
        self, jobs: Sequence[Candidate], now: float, capacity: int
    ) -> tuple[list[Candidate], dict[str, int]]:
        """``order(jobs, now)`` and ``shares(jobs, capacity)``, from one pass over the
        ordered jobs for both, as a pass reads every job's candidate and view."""
        ordered, demands = self._order(jobs, now)
        return ordered, self._waterfill(capacity, demands)

    def _waterfill(self, capacity: int, demands: dict[str, int]) -> dict[str, int]:
        return waterfill(capacity, demands, {u: self.weight(u) for u in demands})

    def _order(
        self, jobs: Sequence[Candidate], now: float
    ) -> tuple[list[Candidate], dict[str, int]]:
        """The jobs in order, and each user's demand (``_demands``)."""
        ordered = self.within.order(jobs, now)
        if not ordered:
            return ordered, {}
        first = ordered[0].job.user
        one = True
        total = 0
        for c in ordered:  # most clusters' jobs are one user's: checked while summing
            job = c.job
            if job.user != first:
                one = False
                break
            total += job.max_gpus if job.elastic else job.requested_gpus  # demand(c)
        demands: dict[str, int]
        per_user: dict[str, list[Candidate]] = {}
        if one:
            per_user[first] = ordered  # no list of their own to build
            demands = {first: total}
        else:
            for c in ordered:
                per_user.setdefault(c.job.user, []).append(c)
            demands = _demands(ordered)
        if not isinstance(self.within, Prioritised):
            # Under ``Prioritised`` each user's jobs are in priority order already (a
            # part of a list sorted stably by priority is), and sorting them is moot.
            for user, queue in per_user.items():
                if any(c.job.priority != queue[0].job.priority for c in queue):
                    per_user[user] = sorted(queue, key=lambda c: -c.job.priority)
        if len(per_user) == 1:
            return next(iter(per_user.values())), demands
        heap = [(0.0, user, 0) for user in per_user]
        heapq.heapify(heap)
        out: list[Candidate] = []
        while heap:
            claimed, user, i = heapq.heappop(heap)
            c = per_user[user][i]
            out.append(c)
            if i + 1 < len(per_user[user]):
                heapq.heappush(heap, (claimed + claim(c) / self.weight(user), user, i + 1))
        return out, demands


def _demands(jobs: Sequence[Candidate]) -> dict[str, int]:
    """Each user's demand: the sum of their jobs' (``demand``)."""
    demands: dict[str, int] = {}
    # Summed per run of one user's jobs, not with a dictionary's get and set per job:
    # jobs come in long runs of one user's.
    user: str | None = None
    run = 0
    for c in jobs:
        job = c.job
        if job.user != user:
            if user is not None:
                demands[user] = demands.get(user, 0) + run
            user, run = job.user, 0
        run += demand(c)
    if user is not None:
        demands[user] = demands.get(user, 0) + run
    return demands
