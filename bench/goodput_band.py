"""How far the default's ratio to Pollux (Sia) moves when arrivals move by seconds (issue 58).

``bench/goodput.py`` plays each of Pollux's workloads once, as published. A
scheduler's average JCT is not smooth in its input: shift every arrival by up
to half a minute and which job a freed GPU goes to, and so every later
decision, can change. This bench plays each workload at one load under
``ringleader`` and ``pollux`` as published (seed 0) and with each job's
arrival moved by a uniform draw in ``±spread`` seconds (seeds 1 ..), the same
draws for both policies, and reports per workload the ratio at each seed, its
mean and its worst. ``--typed`` plays the three-type cluster of
``bench/goodput_typed.py`` against ``sia`` instead. A change to the default that
moves a workload by less than its band here is not a change a held-out workload
will see.

Writes bench/results/goodput-band.json (``goodput-band-<load>.json`` at another
load, ``goodput-band-typed.json`` typed) and prints the table.

    python bench/goodput_band.py [--typed] [--load 1.0] [--seeds 5] [--spread 30]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

from _common import results_file, stamp
from published import bundled_jobs, typed_bundled_jobs, workloads
from ringleader.policy.catalog import policy_from_config
from ringleader.scenarios import pollux_typed
from ringleader.sim import pollux
from ringleader.sim.submitted import SimJob

BASELINE = {False: "pollux", True: "sia"}
"""What the default is held against: on one GPU type, and on three (``--typed``)."""
GOAL = 0.9
"""Issue 58: the default's average JCT over the baseline's, on each workload at load 1.0
(against ``pollux``, at the other loads never over 1)."""


def jittered(jobs: Sequence[SimJob], seed: int, spread_s: float) -> list[SimJob]:
    """``jobs`` with each arrival moved by a uniform draw in ``±spread_s`` (none before
    the clock starts); seed 0 leaves them as published."""
    if seed == 0:
        return list(jobs)
    draw = random.Random(seed)
    return [
        replace(j, submitted_at=max(0.0, j.submitted_at + draw.uniform(-spread_s, spread_s)))
        for j in jobs
    ]


def one(policy: str, name: str, load: str, seed: int, spread_s: float, typed: bool) -> float:
    """One workload's average JCT under ``policy``, arrivals drawn by ``seed``, on Pollux's
    testbed or (``typed``) the three-type cluster."""
    if typed:
        jobs = jittered(typed_bundled_jobs(name, load), seed, spread_s)
        return pollux_typed.play(jobs, policy_from_config(policy)).summary.avg_jct_s
    adaptive = policy in pollux.ADAPTIVE_POLICIES
    jobs = jittered(bundled_jobs(name, load, adaptive=adaptive), seed, spread_s)
    return pollux.play(jobs, policy_from_config(policy)).summary.avg_jct_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--load", default="1.0", choices=pollux.LOADS)
    parser.add_argument("--typed", action="store_true", help="three GPU types, against sia")
    parser.add_argument(
        "--seeds", type=int, default=5, help="plays per workload, the first as published"
    )
    parser.add_argument(
        "--spread", type=float, default=30.0, help="seconds either way an arrival may move"
    )
    parser.add_argument("--processes", type=int, default=None)
    parser.add_argument("--out", type=Path, default=None, help="default: goodput-band[-…].json")
    args = parser.parse_args()
    if args.out is None:
        suffix = ("-typed" if args.typed else "") + ("" if args.load == "1.0" else f"-{args.load}")
        args.out = results_file(f"goodput-band{suffix}")
    baseline = BASELINE[args.typed]
    seeds = range(args.seeds)
    cells = [
        (p, w, args.load, s, args.spread, args.typed)
        for w in workloads()
        for s in seeds
        for p in ("ringleader", baseline)
    ]
    started = time.perf_counter()
    with ProcessPoolExecutor(args.processes) as pool:
        avg = dict(zip(cells, pool.map(one, *zip(*cells, strict=True)), strict=True))
    table = []
    for w in workloads():
        ratios = [
            avg[("ringleader", w, args.load, s, args.spread, args.typed)]
            / avg[(baseline, w, args.load, s, args.spread, args.typed)]
            for s in seeds
        ]
        table.append(
            {
                "workload": w,
                f"over_{baseline}": [round(r, 4) for r in ratios],
                "mean": round(sum(ratios) / len(ratios), 4),
                "worst": round(max(ratios), 4),
                "best": round(min(ratios), 4),
            }
        )
    every = [r for t in table for r in t[f"over_{baseline}"]]  # type: ignore[attr-defined]
    report = {
        **stamp(
            "python bench/goodput_band.py"
            + (" --typed" if args.typed else "")
            + f" --load {args.load} --seeds {args.seeds} --spread {args.spread:g}"
        ),
        "load": args.load,
        "baseline": baseline,
        "seeds": args.seeds,
        "spread_s": args.spread,
        "wall_s": round(time.perf_counter() - started, 1),
        "summary": {
            f"mean_over_{baseline}": round(sum(every) / len(every), 4),
            "worst_workload_mean": max(float(t["mean"]) for t in table),  # type: ignore[arg-type]
            "worst_play": max(every),
            f"plays_worse_than_{baseline}": sum(r > 1.0 for r in every),
            "plays_over_goal": sum(r > GOAL for r in every) if args.load == "1.0" else None,
            "plays": len(every),
            "goal": GOAL,
        },
        "table": table,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"{'workload':11s} {'per seed (0: as published)':40s} {'mean':>6s} {'worst':>6s}")
    for t in table:
        per = " ".join(f"{r:.3f}" for r in t[f"over_{baseline}"])  # type: ignore[attr-defined]
        print(f"{t['workload']:11s} {per:40s} {t['mean']:6.3f} {t['worst']:6.3f}")
    print(json.dumps(report["summary"]))


if __name__ == "__main__":
    main()
