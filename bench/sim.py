"""Simulator speed: simulated jobs per wall-clock second.

Prints JSON and writes it to bench/results/sim.json. Two workloads:

* ``table3``: the whole Table 3 scenario (6 strategies × 3 loads × 10 seeds,
  in parallel processes, one per core), as ``ringleader simulate --scenario
  table3`` runs it. Target: under 60 s on the project's 2-core machine.
* ``poisson_10k_1024gpu``: 10,000 ResNet-110 jobs, Poisson arrivals with a mean
  gap of 31.25 s (Table 3's moderate load scaled from 64 to 1,024 GPUs), on
  128 nodes × 8 GPUs, under the doubling heuristic with precomputed profiles,
  in one process. ``poisson_10k_1024gpu_ticks`` runs it again deciding once a
  tick (``Simulator(tick_s=...)``, ``ringleader.sim.ticks``), for each tick in
  ``TICKS_S``, with what the tick costs the jobs against deciding at every event.

``python bench/sim.py --large`` runs only issue 19's larger workload instead:
100,000 such jobs on 1,250 nodes × 8 GPUs (the same load), once for each tick
in ``TICKS_S``, printing progress every 10,000 finished jobs, and writes
bench/results/sim-100k.json (a few minutes). With ``--every-event`` it also
decides at every event, which takes about an hour here; without it the file
keeps that run from the last file that has one, with the commit and date it
was measured at.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from typing import Any

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


TICKS_S = (60.0, 300.0)
"""A minute, and five (Gavel decides in rounds of six)."""


def poisson_jobs(count: int, nodes: int) -> list[SimJob]:
    arrivals = poisson_arrivals(count, 500.0 * 64 / (nodes * 8), seed=0)
    return [SimJob(f"job{i:05d}", t, RESNET110_K40, max_gpus=8) for i, t in enumerate(arrivals)]


def bench_poisson(
    count: int = 10_000, nodes: int = 128, progress: bool = False, tick_s: float | None = None
) -> dict[str, Any]:
    jobs = poisson_jobs(count, nodes)

    def report(finished: int, total: int) -> None:
        if finished % 10_000 == 0:
            wall = time.perf_counter() - started
            print(f"  {finished:,} of {total:,} jobs finished in {wall:.0f} s", flush=True)

    sim = Simulator(
        policy_named("precompute"),
        ClusterView.uniform(nodes, 8),
        jobs,
        on_finish=report if progress else None,
        tick_s=tick_s,
    )
    started = time.perf_counter()
    result = sim.run()
    wall = time.perf_counter() - started
    s = result.summary
    return {
        "jobs": count,
        "gpus": nodes * 8,
        "policy": "precompute (doubling heuristic)",
        "tick_s": tick_s,
        "decisions": result.decisions,
        "wall_s": round(wall, 2),
        "jobs_per_s": round(count / wall, 1),
        "decisions_per_s": round(result.decisions / wall, 1),
        "peak_jobs_in_system": s.peak_jobs,
        "avg_jct_h": round(s.avg_jct_s / 3600, 3),
        "avg_jct_s": round(s.avg_jct_s, 1),
        "p99_jct_s": round(s.p99_jct_s, 1),
        "avg_queueing_s": round(s.avg_queueing_s, 1),
        "utilization": round(s.utilization, 4),
        "resizes": result.counts.get("resize", 0),
    }


def ticked(
    every: dict[str, Any], count: int, nodes: int, progress: bool = False
) -> list[dict[str, Any]]:
    """The workload once per tick in ``TICKS_S``, each with its JCT against ``every``'s
    (whose ``avg_jct_s`` a run from before ticks lacks: then its ``avg_jct_h``)."""
    base = every.get("avg_jct_s") or every["avg_jct_h"] * 3600
    runs = []
    for tick in TICKS_S:
        run = bench_poisson(count, nodes, progress, tick_s=tick)
        run["avg_jct_vs_every_event"] = round(run["avg_jct_s"] / base, 4)
        runs.append(run)
    return runs


def large(every_event: bool) -> dict[str, Any]:
    """Issue 19's 100k jobs on 10k GPUs: ticked, and every event (run, or carried over)."""
    key = "poisson_100k_10k_gpu"
    out = results_file("sim-100k")
    command = "python bench/sim.py --large --every-event"
    if every_event:
        every = {**bench_poisson(100_000, 1_250, progress=True), "measured": stamp(command)}
    else:
        try:
            every = json.loads(out.read_text())[key]
        except (OSError, ValueError, KeyError):
            raise SystemExit(f"{out} has no every-event run to keep: add --every-event") from None
        if "measured" not in every:  # a file from before ticks: the run is the file's
            old = json.loads(out.read_text())
            every["measured"] = {k: old[k] for k in ("command", "commit", "date", "calibration_s")}
    return {
        **stamp(command if every_event else "python bench/sim.py --large"),
        key: every,
        f"{key}_ticks": ticked(every, 100_000, 1_250, progress=True),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--large",
        action="store_true",
        help="run only 100k jobs on 10k GPUs, once per tick (minutes), into sim-100k.json",
    )
    parser.add_argument(
        "--every-event",
        action="store_true",
        help="with --large: also decide at every event (about an hour here)",
    )
    args = parser.parse_args()
    if args.every_event and not args.large:
        parser.error("--every-event applies to --large")
    if args.large:
        report = large(args.every_event)
        results_file("sim-100k").write_text(json.dumps(report, indent=2) + "\n")
        print(json.dumps(report, indent=2))
        return
    report = {
        **stamp("python bench/sim.py"),
        "machine": {
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "platform": platform.platform(),
        },
        "table3": bench_table3(),
        "poisson_10k_1024gpu": (every := bench_poisson()),
        "poisson_10k_1024gpu_ticks": ticked(every, 10_000, 128),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
