"""Gavel's max-min fairness, its agnostic twin and Sia on Gavel's own cluster.

Plays Gavel's generator (``ringleader.scenarios.heterogeneity``: 36 GPUs, 12
each of V100, P100 and K80; Poisson arrivals of Gavel's 26 job types) under
``gavel-mmf`` and ``gavel-mmf-agnostic`` (Gavel's heterogeneity-aware and
-agnostic LAS, OSDI'20 §4.1), ``sia`` (SOSP'23), and type-aware ``tiresias`` and
``ringleader`` beside them, at a light and a heavy load. Gavel's paper reports
its heterogeneity-aware LAS up to 3.5x lower average JCT than the agnostic one;
``gain`` is ours, at each load, aware over agnostic (below 1: aware is better).

Writes bench/results/gavel.json.

    python bench/gavel.py [--seeds 3] [--loads 0.6,1.2] [--processes N]
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor

from _common import results_file, stamp
from ringleader.scenarios.heterogeneity import PAPER_GAIN, Run, Setup, run_one, summarise

RUNS = (
    ("gavel-mmf", True),
    ("gavel-mmf", False),
    ("sia", True),
    ("tiresias", True),
    ("ringleader", True),
)
"""(policy, type-aware): gavel-mmf's agnostic variant is gavel-mmf-agnostic."""


def _one(task: tuple[str, bool, float, int]) -> tuple[Run, float]:
    started = time.perf_counter()
    run = run_one(*task, Setup())
    return run, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--loads", default="0.6,1.2")
    parser.add_argument("--processes", type=int, default=None)
    args = parser.parse_args()
    loads = [float(x) for x in args.loads.split(",")]
    tasks = [
        (p, aware, load, seed) for p, aware in RUNS for load in loads for seed in range(args.seeds)
    ]
    tasks.sort(key=lambda t: t[0] != "sia")  # the longest first, so the pool ends together
    started = time.perf_counter()
    with ProcessPoolExecutor(args.processes) as pool:
        done = list(pool.map(_one, tasks))
    runs = [run for run, _ in done]
    walls: dict[str, float] = {}
    for run, wall in done:
        key = run.policy if run.type_aware else f"{run.policy}-agnostic"
        walls[key] = walls.get(key, 0.0) + wall
    cells = summarise(runs)
    by = {(c.policy, c.type_aware, c.load): c for c in cells}
    gain = {}
    for load in loads:
        aware, agnostic = by.get(("gavel-mmf", True, load)), by.get(("gavel-mmf", False, load))
        if aware and agnostic:
            gain[str(load)] = round(aware.avg_jct_s / agnostic.avg_jct_s, 4)
    report = {
        **stamp(f"python bench/gavel.py --seeds {args.seeds} --loads {args.loads}"),
        "cluster": {"v100": 12, "p100": 12, "k80": 12},
        "jobs_per_run": Setup().jobs,
        "seeds": args.seeds,
        "wall_s": round(time.perf_counter() - started, 1),
        "simulation_s_per_policy": {k: round(v, 1) for k, v in sorted(walls.items())},
        "paper_gain": PAPER_GAIN,
        "gain_aware_over_agnostic": gain,
        "results": [c.as_dict() for c in cells],
    }
    out = results_file("gavel")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"{'policy':22s} {'load':>5s} {'avg JCT h':>9s} {'±95% h':>7s} stable fairness")
    for c in cells:
        name = c.policy if c.type_aware else f"{c.policy} (agnostic)"
        print(
            f"{name:22s} {c.load:5.2f} {c.avg_jct_s / 3600:9.2f} {c.ci95_s / 3600:7.2f} "
            f"{c.stable!s:6s} {c.fairness:.3f}"
        )
    print(json.dumps({"gain_aware_over_agnostic": gain, "paper": 1 / PAPER_GAIN}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
