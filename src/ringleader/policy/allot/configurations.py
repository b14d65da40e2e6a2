"""Configurations: a GPU type and a count, and the ILP that gives each job at most one.

Sia's (SOSP'23 §3) way of choosing GPU type and count together, shared by the
allot stages that pose it (``sia.Sia``, ``shortest.ShortestGoodput``): each job may
take one of the configurations each type offers (1, 2, 4 … GPUs on one node,
then whole nodes), each type's configurations within its GPUs. A stage says what
each job's configurations cost; ``choose`` picks the cheapest whole, with HiGHS
(``scipy.optimize.milp``), to a relative gap of 1e-4, or exactly where the
cluster is small (``_table``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ringleader.perf.goodput import GoodputSpeed
from ringleader.perf.highs import milp
from ringleader.perf.speed import SpeedModel
from ringleader.policy.allot import _table
from ringleader.policy.allot.stage import Allotment, Allotted
from ringleader.policy.model.objective import Candidate, solo_curve
from ringleader.policy.model.plan import ALLOTTED, note
from ringleader.policy.model.views import ClusterView, JobView

MIP_GAP = 1e-4
TIME_LIMIT_S = 5.0
"""HiGHS stops here with the best allocation found; Sia's rounds are a minute."""


def configurations(cluster: ClusterView) -> list[Allotment]:
    """Sia's configurations of each type: 1, 2, 4 … GPUs up to a node, then whole nodes."""
    offered: list[Allotment] = []
    for gpu_type in cluster.types:
        nodes = [n for n in cluster.nodes if n.gpu_type == gpu_type]
        per_node = max(n.gpus for n in nodes)
        sizes, k = [], 1
        while k < per_node:
            sizes.append(k)
            k *= 2
        sizes.append(per_node)
        sizes += [per_node * m for m in range(2, len(nodes) + 1)]
        total = cluster.capacity_of(gpu_type)
        offered += [Allotment(gpu_type, s) for s in sizes if s <= total]
    return offered


def may_take(job: JobView, gpus: int) -> bool:
    """Whether ``job`` may run on ``gpus`` GPUs: its request, or within its bounds."""
    if not job.elastic:
        return gpus == job.requested_gpus
    return job.min_gpus <= gpus <= job.max_gpus


def rate(c: Candidate, gpus: int, own: SpeedModel | None = None) -> float:
    """Progress per second on ``gpus`` GPUs by the candidate's speed model, or by ``own``
    (a type's): goodput where the job picks its own batch."""
    speed = c.speed if own is None else own
    if isinstance(speed, GoodputSpeed) and speed.best_at is not None:
        return speed.goodput(gpus, 1.0 - c.job.remaining_fraction)
    seconds = c.whole_seconds(gpus) if own is None else solo_curve(c.job.epochs, own)(gpus)
    return 1.0 / seconds if seconds > 0 else 0.0


def held(job: JobView, cluster: ClusterView) -> Allotment | None:
    """The configuration a running job holds (None: it spans types)."""
    types = {cluster.type_of(d.node) for d in job.devices[: job.workers]}
    return Allotment(types.pop(), job.workers) if len(types) == 1 else None


Row = tuple[Candidate, list[int], np.ndarray, int | None]
"""A job, the configurations it may take (indices into the offered ones), its gain
on each (a stage's measure: a speed-up, a goodput), and which of them it holds (None: none)."""
Rows = Sequence[Row]


def choose(
    rows: Rows,
    costs: Sequence[np.ndarray],
    offered: Sequence[Allotment],
    cluster: ClusterView,
    no_alloc: float,
    *,
    exact_when_small: bool = False,
) -> list[int | None]:
    """Each row's chosen configuration (an index into ``offered``; None: nothing), that
    minimise the sum of the chosen ``costs`` (one array a row, one cost per option) plus
    ``no_alloc`` for each job left with nothing; ``exact_when_small``: solved exactly
    by ``_table`` where the cluster is small enough, not to HiGHS's gap."""
    types = cluster.types
    capacity = [cluster.capacity_of(t) for t in types]
    if exact_when_small and _table.small_enough(capacity, sum(len(r[1]) for r in rows)):
        where = [[(types.index(offered[i].gpu_type), offered[i].gpus) for i in r[1]] for r in rows]
        picked = _table.cheapest([c - no_alloc for c in costs], where, capacity)
        return [None if k is None else r[1][k] for r, k in zip(rows, picked, strict=True)]
    from scipy import sparse  # here: importing scipy costs every command that lists policies

    job_of: list[int] = []
    config_of: list[int] = []
    for j, (_, options, *_) in enumerate(rows):
        job_of += [j] * len(options)
        config_of += options
    cost = np.concatenate(costs) - no_alloc
    n = len(cost)
    columns = np.arange(n)
    once = sparse.csr_matrix((np.ones(n), (job_of, columns)), shape=(len(rows), n))
    types = cluster.types
    type_row = [types.index(offered[i].gpu_type) for i in config_of]
    width = [offered[i].gpus for i in config_of]
    per_type = sparse.csr_matrix((width, (type_row, columns)), shape=(len(types), n))
    result = milp(
        cost,
        integrality=np.ones(n),
        bounds=(0, 1),
        constraints=[
            (once, -np.inf, np.ones(len(rows))),
            (per_type, -np.inf, np.asarray(capacity, dtype=float)),
        ],
        options={"mip_rel_gap": MIP_GAP, "time_limit": TIME_LIMIT_S},
    )
    if result.x is None:
        raise RuntimeError(f"Sia's ILP found no allocation: {result.message}")
    picks: list[int | None] = [None] * len(rows)
    for k in np.flatnonzero(result.x > 0.5):
        picks[job_of[k]] = config_of[k]
    return picks


def allotted(rows: Rows, chosen: Sequence[int | None], offered: Sequence[Allotment]) -> Allotted:
    """Each row's job with the configuration ``choose`` picked for it, and why."""
    allotments: dict[str, Allotment] = {}
    notes = {}
    for (c, *_), pick in zip(rows, chosen, strict=True):
        if pick is not None:
            allotments[c.job.id] = offered[pick]
            notes[c.job.id] = note(ALLOTTED, offered[pick].gpus)
    return Allotted(allotments, notes)
