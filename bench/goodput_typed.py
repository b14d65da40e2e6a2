"""The default against Sia on Pollux's workloads over three GPU types (issue 58).

Plays each of Pollux's seven bundled 160-job workloads on 64 GPUs of three
types, 24 V100, 20 P100 and 20 K80 (``ringleader.scenarios.pollux_typed``:
each job's speed on a type from Gavel's throughputs for the nearest job type),
under ``ringleader`` (the default), ``sia`` (Sia's ILP over GPU type and count
by goodput, true tables) and ``pollux`` (type-blind, true tables). Every
policy's jobs adapt their batch. Issue 58's goal: the default's average JCT at
most 0.9x ``sia``'s.

Writes bench/results/goodput-typed.json and prints the table.

    python bench/goodput_typed.py [--loads 1.0] [--processes 2]
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from _common import results_file, stamp
from published import decision_ms, typed_bundled_jobs, workloads
from ringleader.policy.catalog import policy_from_config
from ringleader.scenarios import pollux_typed
from ringleader.sim import pollux
from ringleader.sim.timed import Timed

POLICIES = ("ringleader", "sia", "pollux")
GOAL = 0.9
"""Issue 58: the default's average JCT over ``sia``'s on the heterogeneous cluster."""


def one(policy: str, name: str, load: str) -> dict[str, object]:
    """One workload at one load under one policy on the typed cluster."""
    jobs = typed_bundled_jobs(name, load)
    started = time.perf_counter()
    timed = Timed(policy_from_config(policy))
    result = pollux_typed.play(jobs, timed)
    return {
        "policy": policy,
        "workload": name,
        "load": load,
        "jobs": len(jobs),
        "finished": result.summary.finished,
        "avg_jct_s": round(result.summary.avg_jct_s, 1),
        "wall_s": round(time.perf_counter() - started, 2),
        "decision_ms": decision_ms(timed.seconds),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loads", default="1.0", help="job loads, of " + ",".join(pollux.LOADS))
    parser.add_argument("--processes", type=int, default=None)
    parser.add_argument("--out", type=Path, default=results_file("goodput-typed"))
    args = parser.parse_args()
    loads = args.loads.split(",")
    cells = [(p, w, load) for load in loads for p in POLICIES for w in workloads()]
    started = time.perf_counter()
    with ProcessPoolExecutor(args.processes) as pool:
        rows = list(pool.map(one, *zip(*cells, strict=True)))
    avg = {(r["policy"], r["workload"], r["load"]): float(r["avg_jct_s"]) for r in rows}  # type: ignore[arg-type]
    table = [
        {
            "workload": w,
            "load": load,
            **{f"{p}_s": avg[(p, w, load)] for p in POLICIES},
            "over_sia": round(avg[("ringleader", w, load)] / avg[("sia", w, load)], 4),
        }
        for load in loads
        for w in workloads()
    ]
    ratios = [float(t["over_sia"]) for t in table]  # type: ignore[arg-type]
    p99 = {
        p: max(float(r["decision_ms"]["p99"]) for r in rows if r["policy"] == p)  # type: ignore[index]
        for p in POLICIES
    }
    report = {
        **stamp("python bench/goodput_typed.py"),
        "cluster": {t: n * per for t, (n, per) in pollux_typed.CLUSTER.items()},
        "gavel_job_types": dict(pollux_typed.GAVEL_JOB_TYPES),
        "wall_s": round(time.perf_counter() - started, 1),
        "goals": {
            "mean_over_sia": round(sum(ratios) / len(ratios), 4),
            "worst_over_sia": max(ratios),
            "goal": GOAL,
            "met": max(ratios) <= GOAL,
            "decision_p99_ms": p99,
        },
        "table": table,
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"{'load':>4s} {'workload':11s} {'default':>8s} {'sia':>8s} {'pollux':>8s} /sia")
    for t in table:
        print(
            f"{t['load']:>4s} {t['workload']:11s} {t['ringleader_s']:8.0f} {t['sia_s']:8.0f} "
            f"{t['pollux_s']:8.0f} {t['over_sia']}"
        )
    print(json.dumps(report["goals"]))


if __name__ == "__main__":
    main()
