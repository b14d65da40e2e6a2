"""Pollux's allocation (OSDI'21 §4.2): the GPU counts that maximise the p-mean of speed-ups.

Each job's speed-up on ``k`` GPUs is its best goodput there over its best goodput
on a fair share of the cluster (``ceil(GPUs / jobs)``), where its speed model
tells goodput (``perf.goodput.GoodputSpeed``: a job that picks its own batch);
otherwise its throughput, from the predicted time of the whole job. The cluster's
fitness is ``((1/J) · Σ speedup_j ^ p) ^ (1/p)``; with ``p < 0`` a job left with
nothing drags it down hard, so every job is served before any is served well.

Pollux searches allocations with a genetic algorithm; for GPU counts the fitness
is a sum over jobs of ``(speedup + ε) ^ p`` under one capacity, which dynamic
programming over jobs and GPUs solves exactly (``J · C · K`` steps, vectorised
per job); past ``EXACT_CELLS`` a greedy by marginal gain stands in. Placement
is the place stage's, on the fewest nodes; speed-ups are weighed at the most
compact layout of each count, as that stage lays it out.

Two rules of Pollux's kept: a job is not given more than ``trust`` times the most
GPUs it was measured on (its model is not trusted further out; Pollux's is 2), and a job whose count
changes is discounted by ``age / (age + δ)`` for the restart ``δ`` it costs,
``age`` here the time it has run at its present size (Pollux: since submission,
less its restarts; a view does not carry either).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ringleader.perf.goodput import GoodputSpeed
from ringleader.policy.model.objective import Candidate
from ringleader.policy.model.views import JobView
from ringleader.policy.size.growth import Counts
from ringleader.policy.size.steps import Growth
from ringleader.policy.size.urgency import SRPT, Urgency

EXACT_CELLS = 20_000_000
"""Past this many (job, count, GPUs) cells the dynamic programme gives way to a greedy:
about a tenth of a second of numpy here; 64 GPUs and 160 jobs are 0.7 million."""
EPSILON = 4e-3
"""Added to each speed-up before the power mean: Pollux's 1e-3, on speed-ups it scales
by a node's share of the cluster (a quarter, on its 4-GPU nodes)."""

UNTOLD_S = 1e12
"""The remaining seconds weighed for a job whose model cannot tell them."""


@dataclass(frozen=True, slots=True)
class PowerMeanSpeedup:
    """Pollux's allocation: see the module docstring. ``p``: the fairness knob (-1)."""

    name: str = "pollux"
    p: float = -1.0
    trust: int = 2
    """The most GPUs a job is given, as a multiple of the most it was measured on."""
    shortest_first: float = 0.0
    """0: Pollux's p-mean. Above 0: the counts that maximise ``Σ w · speedup ^ q`` instead
    (``q`` this value, ``w`` the job's weight by ``urgency`` from every job's seconds
    left at its fair share): goodput spent where it ends a job soonest, as
    shortest-remaining-first does, but only as far as a GPU still helps (see
    ``remaining_at_fair``)."""
    urgency: Urgency = SRPT
    """``w`` above. ``SRPT`` weighs a job's speed-up by its remaining time, as
    SRPT would, and the few long jobs that make most of an average JCT on Pollux's
    workloads wait for every short one; the default weighs by rank (``urgency``)."""
    needs_speed: bool = True
    needs_true_remaining: bool = False

    def base(self, jobs: Sequence[Candidate], capacity: int) -> Counts:
        return {}  # no job is owed GPUs: the fitness decides every count

    def grow(self, jobs: Sequence[Candidate], counts: Counts, free: int) -> Growth:
        given = dict(counts)
        rest = [c for c in jobs if c.job.id not in given]
        if not rest or free <= 0:
            return Growth(given, {})
        fair = max(1, math.ceil(free / len(rest)))
        weights = (
            self.urgency.weights([remaining_at_fair(c, fair) for c in rest])
            if self.shortest_first > 0
            else [1.0] * len(rest)
        )
        costs = [self._costs(c, free, fair, w) for c, w in zip(rest, weights, strict=True)]
        exact = sum(len(cost) for cost in costs) * (free + 1) <= EXACT_CELLS
        chosen = _cheapest(costs, free) if exact else _greedy(costs, free)
        for c, k in zip(rest, chosen, strict=True):
            if k > 0:
                given[c.job.id] = k
        return Growth(given, {})

    def _costs(self, c: Candidate, free: int, fair: int, weight: float) -> np.ndarray:
        """``(speedup(k) + ε) ^ p`` for ``k`` = 0 .. the most the job may take (or
        ``-weight · speedup(k) ^ q`` where ``shortest_first`` is ``q``)."""
        job = c.job
        most = trusted_most(job, self.trust, free)
        speed = self._speedups(c, most, fair)
        discount = restart_discount(job)
        if discount < 1.0:
            speed = [s if k == job.workers else s * discount for k, s in enumerate(speed)]
        if self.shortest_first > 0:
            return -(np.asarray(speed) ** self.shortest_first) * weight
        return (np.asarray(speed) + EPSILON) ** self.p

    @staticmethod
    def _speedups(c: Candidate, most: int, fair: int) -> list[float]:
        """Speed-up at ``k`` = 0 .. ``most``: none below the job's ``min_gpus``, and one
        at every count for a job with no speed model yet (measured at one size only,
        on the server), which is then given the least it runs on rather than nothing."""
        floor = c.job.min_gpus
        done = 1.0 - c.job.remaining_fraction
        speed = c.speed
        if speed is None:
            return [0.0 if k < floor else 1.0 for k in range(most + 1)]
        if isinstance(speed, GoodputSpeed) and speed.best_at is not None:
            rates = [0.0, *speed.goodputs(most, done).tolist()]
            base = speed.goodput(min(fair, c.job.max_gpus), done)
        else:
            rates = [0.0] + [1.0 / c.whole_seconds(k) for k in range(1, most + 1)]
            base = 1.0 / c.whole_seconds(min(fair, c.job.max_gpus))
        return [r / base if base > 0 and k >= floor else 0.0 for k, r in enumerate(rates)]


def trusted_most(job: JobView, trust: int, free: int) -> int:
    """The most GPUs ``job`` is weighed at: ``trust`` times the most it was measured on,
    within its ``max_gpus`` and ``free``; yet it may keep what it has, and have the least
    it runs on, whatever the trust."""
    most = min(job.max_gpus, free, max(trust * max(job.observations, default=0), 1))
    return max(most, min(max(job.workers, job.min_gpus), job.max_gpus, free))


def restart_discount(job: JobView) -> float:
    """What a running job's every other size is worth over its own: ``age / (age + δ)``,
    ``δ`` its restart and ``age`` its time at its present size; 1.0 for a job that holds
    nothing or restarts for free."""
    if not job.workers or job.restart_s <= 0:
        return 1.0
    age = job.attained_gpu_s / job.workers
    return age / (age + job.restart_s)


def remaining_at_fair(c: Candidate, fair: int) -> float:
    """Seconds the job has left on a fair share of the cluster, as its view tells them.

    A job that picks its batch has ``epochs`` at its submitted batch ``B``; as
    progress in steps at the smallest batch ``M0`` that is ``epochs · examples / M0``
    (exact at ``B = M0``, more than it will need above it), over its goodput there.
    Any other job: its predicted remaining time. No less than a second; ``UNTOLD_S``
    for a job whose model cannot say, which then takes only what no other job helps on."""
    job = c.job
    k = min(fair, job.max_gpus)
    speed = c.speed
    if isinstance(speed, GoodputSpeed) and speed.best_at is not None:
        shape = job.shape
        submitted = shape.global_batch or shape.batch_per_worker
        m0 = job.gradient.smallest_batch if job.gradient is not None else submitted
        progress = job.epochs.at(1) * shape.examples_per_epoch / max(m0, 1)
        rate = speed.goodput(k, 1.0 - job.remaining_fraction)
        return max(job.remaining_fraction * progress / rate, 1.0) if rate > 0 else UNTOLD_S
    return max(c.remaining_seconds(k), 1.0) if c.solo is not None else UNTOLD_S


def _cheapest(costs: Sequence[np.ndarray], capacity: int) -> list[int]:
    """Each job's count, minimising the sum of its ``costs[j][k]`` over ``Σ k ≤ capacity``."""
    inf = math.inf
    best = np.zeros(capacity + 1)
    choices = []
    for cost in costs:
        options = len(cost)
        table = np.full((options, capacity + 1), inf)
        for k in range(min(options, capacity + 1)):
            table[k, k:] = best[: capacity + 1 - k] + cost[k]
        pick = np.argmin(table, axis=0)
        best = table[pick, np.arange(capacity + 1)]
        choices.append(pick)
    left = int(np.argmin(best))
    counts = []
    for pick in reversed(choices):
        k = int(pick[left])
        counts.append(k)
        left -= k
    return counts[::-1]


def _greedy(costs: Sequence[np.ndarray], capacity: int) -> list[int]:
    """Each job's count by marginal gain: one GPU at a time to the job whose cost falls
    most for it, looking as far ahead as its costs go (so a dip is crossed); for
    clusters too large to solve exactly (``EXACT_CELLS``)."""
    counts = [0] * len(costs)
    heap: list[tuple[float, int, int]] = []

    def push(j: int) -> None:
        k, cost = counts[j], costs[j]
        ahead = [(cost[k] - cost[n]) / (n - k) for n in range(k + 1, len(cost))]
        if ahead:
            best = max(range(len(ahead)), key=ahead.__getitem__)
            if ahead[best] > 0:
                heapq.heappush(heap, (-ahead[best], j, k + 1 + best))

    for j in range(len(costs)):
        push(j)
    left = capacity
    while heap and left > 0:
        _, j, to = heapq.heappop(heap)
        if to - counts[j] > left:
            continue
        left -= to - counts[j]
        counts[j] = to
        push(j)
    return counts
