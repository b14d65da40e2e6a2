"""Scenario ``table3``: the ring-allreduce seed's Table 3, on our simulator.

64 GPUs (8 nodes × 8), identical ResNet-110 jobs (``RESNET110_K40``), Poisson
arrivals with mean gaps of 250 / 500 / 1000 s and the seed's job counts
(206 / 114 / 44), six strategies, several arrival seeds. Every strategy sees
the same arrivals for a given seed, so their differences are not noise in the
workload. Jobs may use at most 8 GPUs: the seed measured (and so could
simulate) only 1–8.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass

from ringleader.metrics import mean_ci95
from ringleader.policy.catalog import policy_named
from ringleader.policy.model.views import ClusterView
from ringleader.sim.arrivals import poisson_arrivals
from ringleader.sim.engine import DEFAULT_RESTART_DELAY_S, DEFAULT_ROUND_S, Simulator
from ringleader.sim.profiles import RESNET110_K40
from ringleader.sim.submitted import SimJob

STRATEGIES: tuple[str, ...] = ("precompute", "exploratory", "eight", "four", "two", "one")
LOADS: Mapping[str, tuple[float, int]] = {
    "extreme": (250.0, 206),
    "moderate": (500.0, 114),
    "none": (1000.0, 44),
}
PAPER_HOURS: Mapping[str, Mapping[str, float]] = {
    "precompute": {"extreme": 7.63, "moderate": 2.63, "none": 1.40},
    "exploratory": {"extreme": 20.42, "moderate": 2.92, "none": 1.47},
    "eight": {"extreme": 22.76, "moderate": 6.20, "none": 1.40},
    "four": {"extreme": 12.90, "moderate": 3.50, "none": 2.21},
    "two": {"extreme": 11.49, "moderate": 4.58, "none": 3.78},
    "one": {"extreme": 10.10, "moderate": 6.32, "none": 6.37},
}
MAX_GPUS_PER_JOB = 8


def cluster() -> ClusterView:
    return ClusterView.uniform(8, 8)


def workload(load: str, seed: int) -> list[SimJob]:
    gap, count = LOADS[load]
    times = poisson_arrivals(count, gap, seed)
    return [
        SimJob(f"job{i:03d}", t, RESNET110_K40, max_gpus=MAX_GPUS_PER_JOB)
        for i, t in enumerate(times)
    ]


@dataclass(frozen=True, slots=True)
class Run:
    strategy: str
    load: str
    seed: int
    avg_jct_h: float
    jcts_h: tuple[float, ...]
    peak_jobs: int
    resizes: int
    wall_s: float


def run_one(
    strategy: str,
    load: str,
    seed: int,
    restart_delay_s: float = DEFAULT_RESTART_DELAY_S,
    round_s: float | None = DEFAULT_ROUND_S,
) -> Run:
    result = Simulator(
        policy_named(strategy),
        cluster(),
        workload(load, seed),
        restart_delay_s=restart_delay_s,
        round_s=round_s,
    ).run()
    jcts = tuple(r.jct / 3600 for r in result.records if r.jct is not None)
    return Run(
        strategy,
        load,
        seed,
        result.summary.avg_jct_s / 3600,
        jcts,
        result.summary.peak_jobs,
        sum(r.resizes for r in result.records),
        result.wall_s,
    )


@dataclass(frozen=True, slots=True)
class Table3:
    seeds: int
    runs: tuple[Run, ...]

    def _cell(self, strategy: str, load: str) -> list[float]:
        return [r.avg_jct_h for r in self.runs if r.strategy == strategy and r.load == load]

    def mean(self, strategy: str, load: str) -> float:
        return mean_ci95(self._cell(strategy, load))[0]

    def ci95(self, strategy: str, load: str) -> float:
        return mean_ci95(self._cell(strategy, load))[1]

    def ratio(self, strategy: str, load: str) -> float:
        return self.mean(strategy, load) / self.mean("precompute", load)

    def jcts(self, strategy: str, load: str) -> list[float]:
        return [j for r in self.runs if r.strategy == strategy and r.load == load for j in r.jcts_h]

    def as_json(self) -> dict[str, object]:
        def grid(cell: Callable[[str, str], float]) -> dict[str, dict[str, float]]:
            return {s: {load: round(cell(s, load), 4) for load in LOADS} for s in STRATEGIES}

        def paper_ratio(s: str, load: str) -> float:
            return PAPER_HOURS[s][load] / PAPER_HOURS["precompute"][load]

        return {
            "units": "hours",
            "seeds": self.seeds,
            "ours": grid(self.mean),
            "paper": {s: dict(PAPER_HOURS[s]) for s in STRATEGIES},
            "ci95": grid(self.ci95),
            "ratio_to_precompute": {"ours": grid(self.ratio), "paper": grid(paper_ratio)},
            "jobs": {load: count for load, (_, count) in LOADS.items()},
            "peak_concurrency": {
                load: max(r.peak_jobs for r in self.runs if r.load == load) for load in LOADS
            },
            "simulated_seconds_wall": round(sum(r.wall_s for r in self.runs), 3),
        }


def _task(args: tuple[str, str, int, float, float | None]) -> Run:
    return run_one(*args)


def run_table3(
    seeds: int = 10,
    *,
    processes: int | None = None,
    restart_delay_s: float = DEFAULT_RESTART_DELAY_S,
    round_s: float | None = DEFAULT_ROUND_S,
    on_done: Callable[[Run], None] | None = None,
) -> Table3:
    """All ``6 × 3 × seeds`` simulations, in parallel processes."""
    if seeds < 1:
        raise ValueError(f"seeds must be at least 1, got {seeds}")
    tasks = [
        (s, load, seed, restart_delay_s, round_s)
        for seed in range(seeds)
        for load in LOADS
        for s in STRATEGIES
    ]
    workers = processes if processes is not None else min(len(tasks), os.cpu_count() or 1)
    runs: list[Run] = []
    if workers <= 1:
        for task in tasks:
            runs.append(_task(task))
            if on_done:
                on_done(runs[-1])
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            for future in as_completed([pool.submit(_task, t) for t in tasks]):
                runs.append(future.result())
                if on_done:
                    on_done(runs[-1])
    runs.sort(key=lambda r: (STRATEGIES.index(r.strategy), list(LOADS).index(r.load), r.seed))
    return Table3(seeds, tuple(runs))
