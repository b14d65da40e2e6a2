"""Gavel's max-min fairness (Narayanan et al., OSDI'20, §4.1 "LAS"), and its agnostic twin.

Gavel writes an allocation as ``X[j][t]``, the fraction of time job ``j`` runs
on GPUs of type ``t``, at the GPUs it asked for (``g_j``). Its throughput is
``Σ_t T[j][t] · X[j][t]``, ``T`` its measured speed on each type; Gavel weighs
it against the throughput the job would have on an equal share of every type,
``X_eq[j][t] = C_t / Σ C · min(1, Σ C / Σ_k g_k)``. It then solves

    maximise  min_j  Σ_t T[j][t] X[j][t] / Σ_t T[j][t] X_eq[j][t]
    s.t.      X ≥ 0,  Σ_t X[j][t] ≤ 1,  Σ_j g_j X[j][t] ≤ C_t,

with an LP solver (here HiGHS, ``scipy.optimize.linprog``). The heterogeneity-
agnostic twin solves the same with ``T = 1`` on every type a job may use: an
equal share of time, whatever each type does for the job. Only the speeds'
ratios between types matter (``JobView.type_speed``), so neither needs a speed
model or a duration.

A max-min optimum leaves every job but the worst-off free to take less than
it could; a second LP keeps the minimum and maximises the sum of normalised
throughputs, so no GPU is left idle that some job could use (Gavel's
water-filling variant goes further, raising each next-worst job in turn).

Rounds (Gavel §5): every six minutes jobs are served in decreasing priority
``Σ_t X[j][t] / received_j``, ``received_j`` the share of its time in the
system it has run (as of the round's start, as ``order.finish_time`` reads it),
each on the type of its largest fraction that has room for it, then any type
it may use that has. Gavel counts time received per type, and so rotates a job
between the types its ``X`` splits it over; a view carries only a job's total
service, so here it runs on its largest fraction's type while that has room.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ringleader.perf.highs import linprog
from ringleader.policy.allot.stage import Allotment, Allotted
from ringleader.policy.model.memory import Memory, memory_of
from ringleader.policy.model.objective import Candidate
from ringleader.policy.model.views import ClusterView, JobView
from ringleader.policy.order.finish_time import most_owed
from ringleader.policy.place.type_aware import usable_types

ROUND_S = 360.0
"""Gavel's round."""
KEEP_MIN = 1.0 - 1e-6
"""The second LP keeps the first one's minimum to within this (the solver's tolerance)."""


@dataclass(frozen=True, slots=True)
class MaxMinFair:
    """Gavel's max-min fairness: see the module docstring. ``aware``: weigh each job's
    speed on each type (False: the agnostic twin, equal time on any type)."""

    aware: bool = True
    round_s: float = ROUND_S
    needs_speed: bool = False
    needs_true_remaining: bool = False
    memory: Memory[LastFractions] = field(
        default_factory=memory_of(lambda: LastFractions()),
        init=False,
        repr=False,
        compare=False,
    )
    """The last LP's fractions and what they were solved for: the same jobs, GPUs and
    speeds give the same fractions, so a round with no arrival or end solves nothing."""

    @property
    def name(self) -> str:
        return "gavel-mmf" if self.aware else "gavel-mmf-agnostic"

    def allot(self, jobs: Sequence[Candidate], cluster: ClusterView, now: float) -> Allotted:
        views = [c.job for c in jobs]
        if not views:
            return Allotted({}, {})
        types = cluster.types
        capacity = np.asarray([cluster.capacity_of(t) for t in types], dtype=float)
        gpus = np.asarray([_gpus(j) for j in views], dtype=float)
        speeds = np.asarray([self._speeds(j, cluster) for j in views])
        speeds[gpus[:, None] > capacity[None, :]] = 0.0  # a type too small for the job
        runnable = speeds.max(axis=1, initial=0.0) > 0
        fractions = self.memory.kept.fractions(views, speeds, gpus, capacity, runnable)
        start = math.floor(now / self.round_s) * self.round_s
        ranked = [i for i in most_owed(views, fractions.sum(axis=1), now, start) if runnable[i]]
        left = capacity.astype(int).tolist()
        allotments: dict[str, Allotment] = {}
        waiting = []
        for i in ranked:
            k = _roomiest(fractions[i], int(gpus[i]), left)
            if k is None:
                waiting.append(i)
            else:
                allotments[views[i].id] = Allotment(types[k], int(gpus[i]))
        for i in waiting:  # GPUs no fraction claimed: to anyone who can use them
            k = _roomiest(speeds[i], int(gpus[i]), left)
            if k is not None:
                allotments[views[i].id] = Allotment(types[k], int(gpus[i]))
        return Allotted(allotments, {})

    def _speeds(self, job: JobView, cluster: ClusterView) -> list[float]:
        """The job's speed on each of the cluster's types (0: it may not run there)."""
        usable = usable_types(job, cluster)
        return [
            (job.type_speed.get(t, 1.0) if self.aware else 1.0) if t in usable else 0.0
            for t in cluster.types
        ]


def _roomiest(weights: np.ndarray, want: int, left: list[int]) -> int | None:
    """The type of the largest positive weight with ``want`` GPUs left, taken from
    ``left``; None where none has room."""
    for k in sorted(np.flatnonzero(weights > 1e-9), key=lambda k: -weights[k]):
        if left[k] >= want:
            left[k] -= want
            return int(k)
    return None


class LastFractions:
    """The fractions last solved, by the jobs, GPUs, speeds and capacity they are for."""

    __slots__ = ("key", "value")

    def __init__(self) -> None:
        self.key: tuple[object, ...] | None = None
        self.value: np.ndarray = np.zeros((0, 0))

    def fractions(
        self,
        views: Sequence[JobView],
        speeds: np.ndarray,
        gpus: np.ndarray,
        capacity: np.ndarray,
        runnable: np.ndarray,
    ) -> np.ndarray:
        key = (tuple(j.id for j in views), speeds.tobytes(), gpus.tobytes(), capacity.tobytes())
        if key != self.key:
            value = np.zeros_like(speeds)
            if runnable.any():
                value[runnable] = fair_fractions(speeds[runnable], gpus[runnable], capacity)
            self.key, self.value = key, value
        return self.value


def _gpus(job: JobView) -> int:
    """The GPUs Gavel runs a job on: the number it asked for, within its bounds."""
    return max(1, min(max(job.requested_gpus, job.min_gpus), job.max_gpus))


def fair_fractions(speeds: np.ndarray, gpus: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """``X[j][t]`` maximising the least normalised throughput, then their sum (the
    module docstring): ``speeds[j][t]`` each job's speed on each type (0: it may not
    run there), ``gpus[j]`` its GPUs, ``capacity[t]`` each type's GPUs."""
    from scipy import sparse  # here: importing scipy costs every command that lists policies

    jobs, types = speeds.shape
    scale = min(1.0, float(capacity.sum()) / float(gpus.sum()))
    equal = capacity / capacity.sum() * scale
    norm = speeds / (speeds @ equal)[:, None]
    n = jobs * types
    rows = np.repeat(np.arange(jobs), types)
    cols = np.arange(n)
    # z - Σ_t norm[j][t] X[j][t] ≤ 0, for every job
    worst = sparse.hstack(
        [sparse.csr_matrix((-norm.ravel(), (rows, cols)), shape=(jobs, n)), np.ones((jobs, 1))]
    )
    # Σ_t X[j][t] ≤ 1: a job runs on one type at a time
    once = sparse.csr_matrix((np.ones(n), (rows, cols)), shape=(jobs, n + 1))
    # Σ_j g_j X[j][t] ≤ C_t
    per_type = sparse.csr_matrix(
        (np.repeat(gpus, types), (np.tile(np.arange(types), jobs), cols)), shape=(types, n + 1)
    )
    a_ub = sparse.vstack([worst, once, per_type]).tocsr()
    b_ub = np.concatenate([np.zeros(jobs), np.ones(jobs), capacity])
    bounds = [(0.0, 1.0 if s > 0 else 0.0) for s in speeds.ravel()] + [(0.0, None)]
    first = linprog(np.concatenate([np.zeros(n), [-1.0]]), A_ub=a_ub, b_ub=b_ub, bounds=bounds)
    if first.status != 0:
        raise RuntimeError(f"Gavel's max-min LP failed: {first.message}")
    bounds[-1] = (float(first.x[-1]) * KEEP_MIN, None)
    second = linprog(np.concatenate([-norm.ravel(), [0.0]]), A_ub=a_ub, b_ub=b_ub, bounds=bounds)
    x: np.ndarray = second.x if second.status == 0 else first.x
    fractions: np.ndarray = np.clip(x[:n].reshape(jobs, types), 0.0, 1.0)
    return fractions
