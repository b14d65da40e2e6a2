"""Scenario ``gandiva-cluster``: sharing against no sharing on a 180-GPU cluster.

Gandiva's cluster experiment ran "synthetic DLT jobs modelled on a production
trace" on 180 GPUs and reported 4.5x lower mean time to the first 100
minibatches and 26% higher cluster throughput. Ours, per seed:

* jobs are drawn (with replacement) from a Philly-derived Gavel trace — job
  type, GPU count and step count together — keeping jobs of at most 8 GPUs
  (the largest size with measured throughputs); a job's duration is its steps
  over its type's measured V100 throughput, clipped to ``max_job_hours`` so a
  run of hours sees jobs finish;
* arrivals are Poisson at the rate that asks for ``load`` times the
  cluster's GPU-seconds (default 2.0: a cluster with a backlog, where
  throughput can differ at all — below saturation both keep up);
* the cluster is 45 servers of 4 GPUs; arrivals start ``warmup_hours``
  before the measured window of ``hours``, so the window sees a loaded
  cluster rather than an empty one filling up.

Metrics, over the window: mean time from submission to the first 100
minibatches for jobs submitted in it (a job that never got there counts the
time until the horizon, which can only flatter the slower policy), and
cluster throughput: useful work done in the window in exclusive-GPU-hours
(completed fraction times GPUs times duration alone) per GPU-hour of the
cluster.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ringleader.metrics import mean_ci95
from ringleader.policy.catalog import policy_named
from ringleader.policy.model.plan import Decider
from ringleader.policy.model.views import ClusterView
from ringleader.sim.contention import GavelContention
from ringleader.sim.engine import Simulator
from ringleader.sim.jobs import FIRST_MINIBATCHES
from ringleader.sim.profiles import RESNET110_K40
from ringleader.sim.result import SimResult
from ringleader.sim.submitted import SimJob
from ringleader.traces.jobs import duration_of, gavel_table
from ringleader.traces.load import TraceJob, load_trace, resolve_trace

PAPER = {"first100_speedup": 4.5, "throughput_gain": 0.26}
BASELINE = "no-sharing"


@dataclass(frozen=True, slots=True)
class ClusterSetup:
    trace: str = "gavel:6c71a0"
    nodes: int = 45
    gpus_per_node: int = 4
    load: float = 2.0
    hours: float = 12.0
    warmup_hours: float = 6.0
    max_job_hours: float = 8.0
    min_job_minutes: float = 5.0

    @property
    def cluster(self) -> ClusterView:
        return ClusterView.uniform(self.nodes, self.gpus_per_node)


def policies() -> dict[str, Decider]:
    """The two stacks compared: same placement code, sharing on or off."""
    return {BASELINE: policy_named(BASELINE), "gandiva": policy_named("gandiva")}


@lru_cache(maxsize=4)
def _population(trace: str) -> tuple[TraceJob, ...]:
    table = gavel_table("v100")
    jobs = load_trace(*resolve_trace(trace))
    return tuple(
        j for j in jobs if j.gpus <= 8 and j.model is not None and f"('{j.model}', 1)" in table
    )


def workload(setup: ClusterSetup, seed: int) -> list[SimJob]:
    rng = np.random.default_rng(seed)
    population = _population(setup.trace)
    lo, hi = setup.min_job_minutes * 60.0, setup.max_job_hours * 3600.0
    durations = np.array([min(max(duration_of(j), lo), hi) for j in population])
    gpus = np.array([j.gpus for j in population])
    capacity = setup.nodes * setup.gpus_per_node
    rate = setup.load * capacity / float(np.mean(durations * gpus))
    horizon = (setup.warmup_hours + setup.hours) * 3600.0
    out: list[SimJob] = []
    t = float(rng.exponential(1.0 / rate))
    while t < horizon:
        i = int(rng.integers(len(population)))
        job, duration = population[i], float(durations[i])
        raw = duration_of(job)
        steps = max(1, round((job.steps or 1) * duration / raw))
        out.append(
            SimJob(
                id=f"j{len(out):05d}",
                submitted_at=t,
                profile=RESNET110_K40,
                max_gpus=job.gpus,
                requested_gpus=job.gpus,
                elastic=False,
                work_scale=duration / RESNET110_K40.seconds_alone(job.gpus),
                kind=job.model,
                minibatches=steps,
            )
        )
        t += float(rng.exponential(1.0 / rate))
    return out


@dataclass(frozen=True, slots=True)
class ClusterMetrics:
    first100_s: float
    """Mean seconds from submission to the first 100 minibatches."""
    throughput: float
    """Useful exclusive-GPU-hours per cluster GPU-hour."""
    jobs: int
    censored: int
    """Jobs that had not reached 100 minibatches at the horizon."""


def measure(result: SimResult, jobs: Sequence[SimJob], setup: ClusterSetup) -> ClusterMetrics:
    start = setup.warmup_hours * 3600.0
    horizon = start + setup.hours * 3600.0
    by_id = {j.id: j for j in jobs}
    before = result.snapshots.get(start, {})
    waits, work, censored = [], 0.0, 0
    for p in result.progress:
        job = by_id[p.id]
        solo = job.work_scale * RESNET110_K40.seconds_alone(job.requested_gpus)
        work += (p.done_fraction - before.get(p.id, 0.0)) * solo * job.requested_gpus
        if p.submitted_at < start:
            continue
        reached = p.first_at if p.first_at is not None else horizon
        censored += p.first_at is None
        waits.append(reached - p.submitted_at)
    seen = {p.id for p in result.progress}
    unseen = [j for j in jobs if j.id not in seen and j.submitted_at >= start]
    waits.extend(horizon - j.submitted_at for j in unseen)
    capacity = setup.nodes * setup.gpus_per_node
    return ClusterMetrics(
        first100_s=float(np.mean(waits)) if waits else math.nan,
        throughput=work / (capacity * setup.hours * 3600.0),
        jobs=len(waits),
        censored=censored + len(unseen),
    )


def run_one(setup: ClusterSetup, name: str, seed: int) -> tuple[ClusterMetrics, SimResult]:
    jobs = workload(setup, seed)
    sim = Simulator(
        policies()[name],
        setup.cluster,
        jobs,
        round_s=None,
        contention=GavelContention(),
        until=(setup.warmup_hours + setup.hours) * 3600.0,
        snapshot_at=(setup.warmup_hours * 3600.0,),
    )
    result = sim.run()
    return measure(result, jobs, setup), result


def _task(args: tuple[ClusterSetup, str, int]) -> tuple[str, int, ClusterMetrics]:
    setup, name, seed = args
    return name, seed, run_one(setup, name, seed)[0]


@dataclass(frozen=True, slots=True)
class ClusterReport:
    setup: ClusterSetup
    seeds: int
    per_seed: dict[str, list[ClusterMetrics]]

    def speedups(self) -> list[float]:
        return [
            b.first100_s / g.first100_s
            for b, g in zip(self.per_seed[BASELINE], self.per_seed["gandiva"], strict=True)
        ]

    def gains(self) -> list[float]:
        return [
            g.throughput / b.throughput - 1.0
            for b, g in zip(self.per_seed[BASELINE], self.per_seed["gandiva"], strict=True)
        ]

    def as_json(self) -> dict[str, object]:
        s_mean, s_ci = mean_ci95(self.speedups())
        g_mean, g_ci = mean_ci95(self.gains())
        detail = {
            name: {
                "first100_minutes": mean_ci95([m.first100_s / 60 for m in ms])[0],
                "throughput": mean_ci95([m.throughput for m in ms])[0],
                "jobs": mean_ci95([float(m.jobs) for m in ms])[0],
                "censored": mean_ci95([float(m.censored) for m in ms])[0],
            }
            for name, ms in self.per_seed.items()
        }
        return {
            "scenario": "gandiva-cluster",
            "seeds": self.seeds,
            "ours": {"first100_speedup": s_mean, "throughput_gain": g_mean},
            "paper": dict(PAPER),
            "ci95": {"first100_speedup": s_ci, "throughput_gain": g_ci},
            "policies": detail,
            "setup": {
                "trace": self.setup.trace,
                "gpus": self.setup.nodes * self.setup.gpus_per_node,
                "gpus_per_node": self.setup.gpus_per_node,
                "load": self.setup.load,
                "hours": self.setup.hours,
                "first_minibatches": FIRST_MINIBATCHES,
            },
        }


def run_cluster(
    setup: ClusterSetup,
    seeds: int,
    *,
    workers: int | None = None,
    on_done: Callable[[], None] | None = None,
) -> ClusterReport:
    tasks = [(setup, name, seed) for seed in range(seeds) for name in policies()]
    per: dict[str, dict[int, ClusterMetrics]] = {name: {} for name in policies()}
    if workers == 1:
        results = map(_task, tasks)
        for name, seed, metrics in results:
            per[name][seed] = metrics
            if on_done is not None:
                on_done()
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            for name, seed, metrics in pool.map(_task, tasks):
                per[name][seed] = metrics
                if on_done is not None:
                    on_done()
    return ClusterReport(setup, seeds, {n: [per[n][s] for s in range(seeds)] for n in per})
