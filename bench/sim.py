"""Simulator speed: simulated jobs per wall-clock second.

Prints JSON and writes it to bench/results/sim.json. Two workloads:

* ``table3``: the whole Table 3 scenario (6 strategies × 3 loads × 10 seeds,
  in parallel processes, one per core), as ``ringleader simulate --scenario
  table3`` runs it. Target: under 60 s on the project's 2-core machine.
* ``poisson_10k_1024gpu``: 10,000 ResNet-110 jobs, Poisson arrivals with a mean
  gap of 31.25 s (Table 3's moderate load scaled from 64 to 1,024 GPUs), on
  128 nodes × 8 GPUs, under the doubling heuristic with precomputed profiles,
  in one process.

``python bench/sim.py --large`` runs only issue 19's larger workload instead:
100,000 such jobs on 1,250 nodes × 8 GPUs (the same load), printing progress
every 10,000 finished jobs, and writes bench/results/sim-100k.json. It takes
more than an hour here.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

from _common import results_file, stamp
from ringleader.policy import ClusterView, policy_named
from ringleader.scenarios.table3 import LOADS, STRATEGIES, run_table3
from ringleader.sim import RESNET110_K40, SimJob, Simulator
from ringleader.sim.arrivals import poisson_arrivals

OUT = results_file("sim")


def bench_table3(seeds: int = 10) -> dict[str, object]:
    started = time.perf_counter()
    result = run_table3(seeds)
    wall = time.perf_counter() - started
    jobs = seeds * len(STRATEGIES) * sum(count for _, count in LOADS.values())
    return {
        "simulations": seeds * len(STRATEGIES) * len(LOADS),
        "jobs": jobs,
        "wall_s": round(wall, 2),
        "jobs_per_s": round(jobs / wall, 1),
        "target_wall_s": 60,
        "precompute_moderate_avg_jct_h": round(result.mean("precompute", "moderate"), 3),
    }


def bench_poisson(
    count: int = 10_000, nodes: int = 128, progress: bool = False
) -> dict[str, object]:
    jobs = [
        SimJob(f"job{i:05d}", t, RESNET110_K40, max_gpus=8)
        for i, t in enumerate(poisson_arrivals(count, 500.0 * 64 / (nodes * 8), seed=0))
    ]

    def report(finished: int, total: int) -> None:
        if finished % 10_000 == 0:
            wall = time.perf_counter() - started
            print(f"  {finished:,} of {total:,} jobs finished in {wall:.0f} s", flush=True)

    sim = Simulator(
        policy_named("precompute"),
        ClusterView.uniform(nodes, 8),
        jobs,
        on_finish=report if progress else None,
    )
    started = time.perf_counter()
    result = sim.run()
    wall = time.perf_counter() - started
    return {
        "jobs": count,
        "gpus": nodes * 8,
        "policy": "precompute (doubling heuristic)",
        "decisions": result.decisions,
        "wall_s": round(wall, 2),
        "jobs_per_s": round(count / wall, 1),
        "decisions_per_s": round(result.decisions / wall, 1),
        "peak_jobs_in_system": result.summary.peak_jobs,
        "avg_jct_h": round(result.summary.avg_jct_s / 3600, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--large",
        action="store_true",
        help="run only 100k jobs on 10k GPUs (over an hour) into sim-100k.json",
    )
    if parser.parse_args().large:
        large = {
            **stamp("python bench/sim.py --large"),
            "poisson_100k_10k_gpu": bench_poisson(100_000, 1_250, progress=True),
        }
        out = results_file("sim-100k")
        out.write_text(json.dumps(large, indent=2) + "\n")
        print(json.dumps(large, indent=2))
        return
    report = {
        **stamp("python bench/sim.py"),
        "machine": {
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "platform": platform.platform(),
        },
        "table3": bench_table3(),
        "poisson_10k_1024gpu": bench_poisson(),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
