"""The default's goodput objective over GPU type and count at once, for mixed clusters.

On one GPU type the default sizes jobs that adapt their batch by
``Σ w · speedup`` (``size.goodput.SHORTER_FIRST``), then places
them. On several types that order fails: the counts are chosen as if every
GPU were the fastest, and the place stage then finds that a job's type has no
room for its count, so it runs on fewer GPUs or slower ones while others sit
idle. Here the same objective is posed over Sia's configurations instead
(``configurations``: a type and a count), so each job's type and count are
chosen together, each type within its GPUs (Sia's configurations, and the
counts a job must or may run at that they lack: a rigid job's request, a job's
least, a running job's present count):

    maximise  Σ_jc X[j][c] · s[j][c] · w_j,   Σ_c X[j][c] ≤ 1,
              Σ_jc gpus_t(c) X[j][c] ≤ C_t,

``s[j][c]`` the job's goodput on configuration ``c`` (its speed on the type
times its goodput at the count) over its goodput on a fair share of the
cluster at the speed its model tells (type speed 1.0), and ``w_j`` its weight by
its remaining seconds at that share (``fitness.remaining_at_fair``) and every other
job's (``size.urgency``). As in the size stage, a job is not given more
than ``trust`` times the most GPUs it was measured on, and a running job's
every configuration but its own is discounted by ``age / (age + δ)`` for the
restart ``δ`` it costs, ``age`` its time at its present size, and its own costs
``KEEP`` less, of its own cost.

Unlike Sia, no job is owed a configuration: a job is left with nothing where
its GPUs end others sooner. The ILP grows with jobs times configurations; past
``MAX_CELLS`` of them the caller sizes by counts instead (``fits``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ringleader.policy.allot.configurations import (
    Row,
    allotted,
    choose,
    configurations,
    held,
    may_take,
    rate,
)
from ringleader.policy.allot.stage import Allotment, Allotted
from ringleader.policy.model.objective import Candidate
from ringleader.policy.model.views import ClusterView
from ringleader.policy.place.type_aware import usable_types
from ringleader.policy.size.fitness import remaining_at_fair, restart_discount, trusted_most
from ringleader.policy.size.urgency import Urgency

MAX_CELLS = 50_000
"""Jobs times configurations past which ``fits`` says no: HiGHS took 0.1 s a decision at
64 GPUs of three types and 160 jobs (3,500 cells), 0.2 s at 256 GPUs and 640 jobs
(26,000), 2.5 s at 1,024 GPUs and 2,560 jobs (345,000)."""
KEEP = 0.1
"""How much less a running job's present configuration costs, as a fraction of its own
cost there: a bias toward no restart, as Sia's ``λ_a``. Not Sia's absolute 0.01: these
costs are weighed speed-ups and span orders of magnitude, and a long job's whole
cost (about −0.001) under an absolute 0.01 never moved from one GPU of an idle cluster.
Swept on ``bench/goodput_typed.py``: ``docs/pollux.md``."""


@dataclass(frozen=True, slots=True)
class ShortestGoodput:
    """The allot stage of this module's docstring."""

    trust: int
    """The most GPUs a job is given, as a multiple of the most it was measured on."""
    urgency: Urgency
    """``w`` above (``fitness.PowerMeanSpeedup.urgency``)."""
    name: str = "goodput-typed"
    needs_speed: bool = True
    needs_true_remaining: bool = False
    max_cells: int = MAX_CELLS

    def fits(self, jobs: int, cluster: ClusterView) -> bool:
        """Whether ``jobs`` jobs on ``cluster`` pose an ILP small enough to solve each
        decision (``MAX_CELLS``)."""
        return jobs * len(configurations(cluster)) <= self.max_cells

    def allot(self, jobs: Sequence[Candidate], cluster: ClusterView, now: float) -> Allotted:
        offered = _offered(jobs, cluster)
        fair = max(1, math.ceil(cluster.capacity / max(len(jobs), 1)))
        rows: list[Row] = []
        costs: list[np.ndarray] = []
        weights = self.urgency.weights([remaining_at_fair(c, fair) for c in jobs])
        for c, weight in zip(jobs, weights, strict=True):
            row = self._row(c, offered, cluster, fair)
            if row is None:
                continue
            cost = -row[2] * weight
            if row[3] is not None:
                cost[row[3]] *= 1.0 + KEEP  # costs are negative: kept is cheaper
            rows.append(row)
            costs.append(cost)
        if not rows:
            return Allotted({}, {})
        chosen = choose(rows, costs, offered, cluster, no_alloc=0.0, exact_when_small=True)
        return allotted(rows, chosen, offered)

    def _row(
        self, c: Candidate, offered: Sequence[Allotment], cluster: ClusterView, fair: int
    ) -> Row | None:
        """The configurations ``c`` may take, its speed-up on each over its ``fair`` share
        (restart-discounted), and which it holds; None where it may take none."""
        job = c.job
        usable = usable_types(job, cluster)
        most = trusted_most(job, self.trust, cluster.capacity)
        if not job.elastic:
            most = max(most, job.requested_gpus)  # a rigid job its request, whatever the trust
        base = rate(c, min(fair, job.max_gpus)) if c.speed is not None else 1.0
        options, gains = [], []
        for i, (gpu_type, gpus) in enumerate(offered):
            if gpu_type not in usable or gpus > most or not may_take(job, gpus):
                continue
            own = job.type_models.get(gpu_type)
            if c.speed is None:
                gain = job.type_speed.get(gpu_type, 1.0)  # no model yet: one GPU as good as many
            elif own is not None:
                gain = rate(c, gpus, own) / base
            else:
                gain = rate(c, gpus) * job.type_speed.get(gpu_type, 1.0) / base
            if gain > 0:
                options.append(i)
                gains.append(gain)
        if not options or base <= 0:
            return None
        speedups = np.asarray(gains)
        here = held(job, cluster) if job.workers else None
        at = next((k for k, i in enumerate(options) if offered[i] == here), None)
        discount = restart_discount(job)
        if discount < 1.0:
            moved = np.asarray([offered[i] != here for i in options])
            speedups = np.where(moved, speedups * discount, speedups)
        return c, options, speedups, at


def _offered(jobs: Sequence[Candidate], cluster: ClusterView) -> list[Allotment]:
    """Sia's configurations, and on each type the counts ``jobs`` need that they lack."""
    offered = configurations(cluster)
    have = set(offered)
    needed: set[int] = set()
    for c in jobs:
        job = c.job
        needed.update((job.min_gpus, job.workers) if job.elastic else (job.requested_gpus,))
    for gpu_type in cluster.types:
        room = cluster.capacity_of(gpu_type)
        for gpus in sorted(needed):
            if 0 < gpus <= room and Allotment(gpu_type, gpus) not in have:
                offered.append(Allotment(gpu_type, gpus))
    return offered
