"""Sia (Jayaram Subramanya et al., SOSP'23, §3): GPU type and count by goodput, one ILP a round.

Each round, for every job and every *configuration* a GPU type offers (1, 2, 4
… GPUs on one node, then whole nodes, as Sia's simulator enumerates them), Sia
estimates the job's goodput there: here its speed on the type
(``JobView.type_speed``) times its goodput at that count (``GoodputSpeed``, a
job that picks its own batch), or its throughput where it keeps its batch; where
the job was measured on each type, that type's own model's (``type_models``). A
job's goodputs are divided by the least of them, so each is a speed-up ``s ≥ 1``
over the job's poorest configuration; a running job's every configuration but
its own is discounted by Pollux's restart factor ``age / (age + δ)`` (``δ`` its
restart, ``age`` its time since submission; none while it is younger than ``δ``).

With ``A = s^p`` (``p = -0.5``: fairness over raw goodput) Sia solves

    minimise  Σ_jc A[j][c] X[j][c] + λ_n · (J − Σ_jc X[j][c])
    s.t.      X ∈ {0, 1},  Σ_c X[j][c] ≤ 1,  Σ_jc gpus_t(c) X[j][c] ≤ C_t,

``λ_n = 1.1`` the cost of a job left with nothing: more than any ``A``, so
giving a job its poorest configuration always lowers the cost, yet a job may
be left out where the GPUs speed others up more (four jobs of speed-ups 1, 1.7
and 2.9 at 1, 2 and 4 GPUs, on 4 GPUs: two on 2 each cost 2·0.77 + 2·1.1 = 3.74,
under the 4·1.0 of one each). A running job's present configuration costs
``λ_a = 0.01`` less (Sia's "penalty for change of alloc"): without it, jobs of
equal speed-ups trade places every round, each trade a restart.

The ILP is solved with HiGHS (``scipy.optimize.milp``), to Sia's relative gap
of 1e-4, every minute. A job that is not elastic has one count, its request,
on any type it may use. ``A`` is rounded to two decimals, as Sia rounds it; so
a round whose jobs' speed-ups moved less than that poses the problem of the
round before, whose answer is kept (``LastSolution``) rather than solved again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ringleader.policy.allot.configurations import (
    Row,
    Rows,
    allotted,
    choose,
    configurations,
    held,
    may_take,
    rate,
)
from ringleader.policy.allot.stage import Allotment, Allotted
from ringleader.policy.model.memory import Memory, memory_of
from ringleader.policy.model.objective import Candidate
from ringleader.policy.model.views import ClusterView
from ringleader.policy.place.type_aware import usable_types

__all__ = ["Sia", "configurations"]

ROUND_S = 60.0
"""Sia's scheduling interval."""
P = -0.5
LAMBDA_NO_ALLOC = 1.1
LAMBDA_CHANGE = 0.01
CLIP = 3000.0
"""Speed-ups past this are clipped, as Sia does (a job whose poorest configuration
barely moves)."""


@dataclass(frozen=True, slots=True)
class Sia:
    """Sia's allocation: see the module docstring."""

    p: float = P
    round_s: float = ROUND_S
    name: str = "sia"
    needs_speed: bool = True
    needs_true_remaining: bool = False
    memory: Memory[LastSolution] = field(
        default_factory=memory_of(lambda: LastSolution()),
        init=False,
        repr=False,
        compare=False,
    )
    """The last ILP and its answer: the same problem has the same answer."""

    def allot(self, jobs: Sequence[Candidate], cluster: ClusterView, now: float) -> Allotted:
        offered = configurations(cluster)
        rows: list[Row] = []
        for c in jobs:
            row = self._row(c, offered, cluster, now)
            if row is not None:
                rows.append(row)
        if not rows:
            return Allotted({}, {})
        chosen = self.memory.kept.solve(rows, offered, cluster, self.p)
        return allotted(rows, chosen, offered)

    def _row(
        self, c: Candidate, offered: Sequence[Allotment], cluster: ClusterView, now: float
    ) -> Row | None:
        """The configurations ``c`` may take, its speed-up on each (restart-discounted)
        and which it holds; None where it may take none."""
        job = c.job
        usable = usable_types(job, cluster)
        counts: dict[int, float] = {}
        options, goodputs = [], []
        for i, (gpu_type, gpus) in enumerate(offered):
            if gpu_type not in usable or not may_take(job, gpus):
                continue
            own = job.type_models.get(gpu_type)
            if own is not None:
                here_rate = rate(c, gpus, own)
            else:
                found = counts.get(gpus)
                if found is None:
                    found = counts[gpus] = rate(c, gpus)
                here_rate = found * job.type_speed.get(gpu_type, 1.0)
            if here_rate > 0:
                options.append(i)
                goodputs.append(here_rate)
        if not options:
            return None
        gains = np.minimum(np.asarray(goodputs) / min(goodputs), CLIP)
        here = held(job, cluster) if job.workers else None
        at = next((k for k, i in enumerate(options) if offered[i] == here), None)
        if job.workers and job.restart_s > 0:
            age = max(0.0, now - job.submitted_at)
            if age >= job.restart_s:
                factor = age / (age + job.restart_s)
                gains = np.where([offered[i] != here for i in options], gains * factor, gains)
        return c, options, gains, at


class LastSolution:
    """The last ILP Sia posed, and its answer (see ``Sia.memory``)."""

    __slots__ = ("answer", "key")

    def __init__(self) -> None:
        self.key: tuple[object, ...] | None = None
        self.answer: list[int | None] = []

    def solve(
        self, rows: Rows, offered: Sequence[Allotment], cluster: ClusterView, p: float
    ) -> list[int | None]:
        """``_solve``'s answer, the one kept where the problem is the one it answered."""
        costs = []
        for _, _, gains, at in rows:
            cost = np.round(gains**p, 2)
            if at is not None:
                cost[at] -= LAMBDA_CHANGE
            costs.append(cost)
        key = (
            tuple(offered),
            tuple(row[0].job.id for row in rows),
            tuple(tuple(row[1]) for row in rows),
            np.concatenate(costs).tobytes(),
        )
        if key != self.key:
            self.key, self.answer = key, choose(rows, costs, offered, cluster, LAMBDA_NO_ALLOC)
        return self.answer
