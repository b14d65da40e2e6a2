"""Scenario ``heterogeneity``: type-aware against type-agnostic policies on mixed GPUs.

Gavel's simulated cluster: 36 GPUs, 12 each of V100, P100 and K80 (here 3
servers of 4 per type). Jobs follow Gavel's generator (``scheduler/utils.py``
in its repository, described in §7 of its paper):

* arrivals are Poisson at ``load`` jobs per hour;
* each job's type is drawn uniformly from Gavel's 26 measured job types;
* its GPU count from Gavel's multi-GPU mix: 1 (70%), 2 (10%), 4 (15%) or 8
  (5%), where the type was measured at that size on every GPU type (else 1);
* its duration on V100s at that size is ``60 × 10^U(1.5, 3)`` s with
  probability 0.8, else ``60 × 10^U(3, 4)`` s (30 min to 7 days);
* its speed on each type is Gavel's measured throughput at that size over
  the V100's (``perf.gpu_types``); a type on which Gavel measured no
  progress is excluded from the job's ``gpu_types``.

Like trace jobs (``traces/jobs.py``), a job scales like the seed's ResNet-110
stretched to its duration at the size it asked for, elastic from 1 GPU up to
that size: an elastic policy may give fewer GPUs, never more.

Each (policy, load, seed) run submits ``jobs`` jobs; JCTs are averaged over
the jobs submitted between the 20th and 80th percentile of arrivals (Gavel's
steady-state window). A run is ``stable`` when the jobs in the system over the
last quarter of the arrival span average under twice those over its second
quarter plus four (a queue that grows without bound doubles), and every
measured job finished by the horizon (three arrival spans).

Fairness is Jain's index over the measured jobs' speed-ups, where a job's
speed-up is its run time alone on its best type at its requested size over
its JCT (1.0: it never waited and never ran slower than it could).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass

import numpy as np

from ringleader.metrics import JobRecord, mean_ci95
from ringleader.perf.gpu_types import GAVEL_TYPES, gavel_job_types, gavel_type_speeds
from ringleader.policy.catalog import policy_named, with_types
from ringleader.policy.model.plan import Decider
from ringleader.policy.model.views import ClusterView
from ringleader.sim.engine import Simulator
from ringleader.sim.profiles import RESNET110_K40
from ringleader.sim.submitted import SimJob

SCALE_MIX = ((1, 0.70), (2, 0.10), (4, 0.15), (8, 0.05))
"""Gavel's multi-GPU job mix: GPUs a job asks for, and how often."""
POLICIES = ("tiresias", "ringleader")
LOADS = (0.3, 0.45, 0.6, 0.75, 0.9, 1.05, 1.2, 1.35)
"""Jobs per hour swept by default (the agnostic policies saturate within it)."""
PAPER_GAIN = 3.5
"""Gavel: up to 3.5× lower average JCT than heterogeneity-agnostic policies."""


@dataclass(frozen=True, slots=True)
class Setup:
    nodes_per_type: int = 3
    gpus_per_node: int = 4
    jobs: int = 400
    restart_delay_s: float = 30.0
    """A checkpoint-stop-restart, charged on every start, resize and migration."""

    @property
    def cluster(self) -> ClusterView:
        return ClusterView.typed(
            {t: (self.nodes_per_type, self.gpus_per_node) for t in GAVEL_TYPES}
        )


@dataclass(frozen=True, slots=True)
class Run:
    policy: str
    type_aware: bool
    load: float
    seed: int
    avg_jct_s: float
    makespan_s: float
    fairness: float
    stable: bool
    measured: int
    growth: float = 0.0


def variant(name: str, type_aware: bool) -> Decider:
    """Policy ``name`` with the type-aware place stage, or with the type-agnostic one."""
    policy = policy_named(name)
    twin = with_types(policy, type_aware)
    if twin is policy and not type_aware:
        raise ValueError(f"policy {name!r} has no type-agnostic variant")
    return twin


def _scale(rng: np.random.Generator, distributed: frozenset[str], job_type: str) -> int:
    r, acc = rng.random(), 0.0
    for scale, p in SCALE_MIX:
        acc += p
        if r < acc:
            return scale if scale == 1 or job_type in distributed else 1
    return 1


def _duration_s(rng: np.random.Generator) -> float:
    if rng.random() < 0.8:
        return 60.0 * 10 ** rng.uniform(1.5, 3.0)
    return 60.0 * 10 ** rng.uniform(3.0, 4.0)


def workload(load: float, seed: int, setup: Setup = Setup()) -> list[SimJob]:
    """``setup.jobs`` Gavel-style jobs arriving at ``load`` per hour (the module docstring)."""
    rng = np.random.default_rng(seed)
    types = gavel_job_types(1)
    distributed = frozenset(t for t in types if all(t in gavel_job_types(s) for s in (2, 4, 8)))
    now = 0.0
    jobs = []
    for i in range(setup.jobs):
        now += rng.exponential(3600.0 / load)
        job_type = types[int(rng.integers(len(types)))]
        gpus = _scale(rng, distributed, job_type)
        duration = _duration_s(rng)
        speeds = gavel_type_speeds(job_type, gpus)
        allowed = tuple(t for t in GAVEL_TYPES if speeds[t] > 0)
        jobs.append(
            SimJob(
                id=f"j{i:04d}",
                submitted_at=now,
                profile=RESNET110_K40,
                max_gpus=gpus,
                requested_gpus=gpus,
                elastic=True,
                work_scale=duration / RESNET110_K40.seconds_alone(gpus),
                type_speed=speeds,
                gpu_types=allowed if len(allowed) < len(GAVEL_TYPES) else (),
            )
        )
    return jobs


def run_one(policy: str, type_aware: bool, load: float, seed: int, setup: Setup = Setup()) -> Run:
    jobs = workload(load, seed, setup)
    span = jobs[-1].submitted_at
    result = Simulator(
        variant(policy, type_aware),
        setup.cluster,
        jobs,
        restart_delay_s=setup.restart_delay_s,
        until=3 * span,
    ).run()
    lo, hi = int(0.2 * len(jobs)), int(0.8 * len(jobs))
    window = {j.id: j for j in jobs[lo:hi]}
    finished = {r.id: r for r in result.records if r.id in window and r.finished_at is not None}
    ended = result.ended_at
    jcts, speedups = [], []
    for job_id, job in window.items():
        record = finished.get(job_id)
        jct = (record.finished_at if record else ended) - job.submitted_at  # type: ignore[operator]
        jcts.append(jct)
        alone = _alone_s(job)
        speedups.append(min(1.0, alone / max(jct, 1e-9)))
    makespan = max((r.finished_at or ended) for r in result.records) if result.records else ended
    growth = backlog_growth(jobs, result.records, span)
    stable = len(finished) == len(window) and growth <= MAX_GROWTH
    return Run(
        policy,
        type_aware,
        load,
        seed,
        float(np.mean(jcts)),
        makespan - jobs[0].submitted_at,
        _jain(speedups),
        stable,
        len(jcts),
        growth,
    )


def _alone_s(job: SimJob) -> float:
    best = max(job.type_speed.values()) if job.type_speed else 1.0
    return job.work_scale * job.profile.seconds_alone(job.requested_gpus) / best


def _jain(values: Sequence[float]) -> float:
    if not values:
        return 1.0
    total = sum(values)
    return total * total / (len(values) * sum(v * v for v in values))


def backlog_growth(jobs: Sequence[SimJob], records: Sequence[JobRecord], span: float) -> float:
    """How much the backlog grew over the last three quarters of arrivals, as a share
    of the jobs that arrived then: the least-squares slope of jobs in the system,
    times that stretch, over its arrivals. A queue that keeps up hovers near 0; one
    served at rate μ < λ grows by 1 - μ/λ."""
    finished = {r.id: r.finished_at for r in records}
    arrivals = np.array([j.submitted_at for j in jobs])
    ends = np.array(
        [math.inf if finished.get(j.id) is None else finished[j.id] for j in jobs], dtype=float
    )
    times = np.linspace(0.25 * span, span, 60)
    counts = np.array([np.sum((arrivals <= t) & (ends > t)) for t in times], dtype=float)
    slope = float(np.polyfit(times, counts, 1)[0])
    arrived = max(int(np.sum(arrivals > 0.25 * span)), 1)
    return slope * 0.75 * span / arrived


MAX_GROWTH = 0.1
"""A run whose backlog grows by more than this share of its arrivals is not stable."""


@dataclass(frozen=True, slots=True)
class Cell:
    policy: str
    type_aware: bool
    load: float
    avg_jct_s: float
    ci95_s: float
    makespan_s: float
    fairness: float
    stable: bool
    seeds: int

    def as_dict(self) -> dict[str, object]:
        """The cell as ``--json`` and ``bench/results/heterogeneity.json`` write it."""
        return asdict(self)


def _task(args: tuple[str, bool, float, int, Setup]) -> Run:
    return run_one(*args)


def run_heterogeneity(
    seeds: int = 3,
    loads: Sequence[float] = LOADS,
    policies: Sequence[str] = POLICIES,
    setup: Setup = Setup(),
    processes: int | None = None,
    on_done: Callable[[Run], None] | None = None,
) -> list[Cell]:
    """Every (policy, type-aware or not, load), averaged over ``seeds`` arrival seeds."""
    tasks = [
        (p, aware, load, seed, setup)
        for p in policies
        for aware in (False, True)
        for load in loads
        for seed in range(seeds)
    ]
    runs: list[Run] = []
    if processes == 1:
        for t in tasks:
            runs.append(_task(t))
            if on_done:
                on_done(runs[-1])
    else:
        with ProcessPoolExecutor(processes) as pool:
            for run in pool.map(_task, tasks):
                runs.append(run)
                if on_done:
                    on_done(run)
    return summarise(runs)


def summarise(runs: Sequence[Run]) -> list[Cell]:
    groups: dict[tuple[str, bool, float], list[Run]] = {}
    for r in runs:
        groups.setdefault((r.policy, r.type_aware, r.load), []).append(r)
    cells = []
    for (policy, aware, load), rs in sorted(groups.items()):
        mean, ci = mean_ci95([r.avg_jct_s for r in rs])
        cells.append(
            Cell(
                policy,
                aware,
                load,
                mean,
                ci,
                float(np.mean([r.makespan_s for r in rs])),
                float(np.mean([r.fairness for r in rs])),
                all(r.measured > 0 for r in rs)
                and float(np.mean([r.growth for r in rs])) <= MAX_GROWTH
                and sum(r.stable for r in rs) * 2 > len(rs),
                len(rs),
            )
        )
    return cells


def goals(cells: Sequence[Cell]) -> dict[str, object]:
    """The issue's two checks, from the cells.

    * ``gain``: for each policy, at the highest load where its agnostic
      variant is stable, type-aware avg JCT over type-agnostic (goal ≤ 0.6);
    * ``default_vs_las``: type-aware default over type-aware LAS (Tiresias)
      avg JCT at each load where both are stable (goal < 1 at every one).
    """
    by: Mapping[tuple[str, bool, float], Cell] = {
        (c.policy, c.type_aware, c.load): c for c in cells
    }
    gain: dict[str, dict[str, float]] = {}
    for policy in sorted({c.policy for c in cells}):
        stable = [c.load for c in cells if c.policy == policy and not c.type_aware and c.stable]
        if not stable:
            continue
        load = max(stable)
        aware = by.get((policy, True, load))
        if aware is not None:
            ratio = aware.avg_jct_s / by[(policy, False, load)].avg_jct_s
            gain[policy] = {"load": load, "ratio": ratio}
    versus: dict[str, float] = {}
    for c in cells:
        if c.policy == "ringleader" and c.type_aware:
            las = by.get(("tiresias", True, c.load))
            if las is not None and las.stable and c.stable:
                versus[str(c.load)] = c.avg_jct_s / las.avg_jct_s
    return {"gain": gain, "default_vs_las": versus}
