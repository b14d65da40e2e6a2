"""The default against Pollux on Pollux's own workloads, jobs adapting their batch (issue 58).

Plays each of Pollux's seven bundled 160-job workloads at each job load (0.5,
1.0, 1.5, 2.0) on Pollux's testbed (``ringleader.sim.pollux``) under
``ringleader`` (the default: jobs pick their own batch and report their gradient,
and the default sizes them by goodput from what it learned online), ``pollux``
(the same jobs; goodput from the true table, an oracle of speed) and
``tiresias`` (each job at its tuned GPUs and batch), and ``pollux-shortest`` (an
oracle: Pollux's speed-ups spent where they end jobs soonest), a bound on what the
default's goodput stage could reach with a perfect model. Issue 58's goals: the
default's average JCT at most 0.9x ``pollux``'s on every workload at load 1.0,
and never worse than ``pollux`` at any load; its decisions' p99 under 100 ms.

Writes bench/results/goodput-sim.json and prints the table.

    python bench/goodput.py [--loads 1.0] [--processes 2]
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from _common import results_file, stamp
from published import one, workloads
from ringleader.sim import pollux

POLICIES = ("ringleader", "pollux", "tiresias", "pollux-shortest")
"""``pollux-shortest``: an oracle bound for the default's goodput stage, not a baseline."""
GOAL_AT_LOAD_1 = 0.9
"""Issue 58: the default's average JCT over ``pollux``'s, on each workload at load 1.0."""
DECISION_GOAL_MS = 100.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loads", default=",".join(pollux.LOADS))
    parser.add_argument("--processes", type=int, default=None)
    parser.add_argument("--out", type=Path, default=results_file("goodput-sim"))
    args = parser.parse_args()
    loads = args.loads.split(",")
    cells = [(p, w, load) for load in loads for p in POLICIES for w in workloads()]
    started = time.perf_counter()
    with ProcessPoolExecutor(args.processes) as pool:
        rows = list(pool.map(one, *zip(*cells, strict=True)))
    avg = {(r["policy"], r["workload"], r["load"]): float(r["avg_jct_s"]) for r in rows}  # type: ignore[arg-type]
    table = []
    for load in loads:
        for w in workloads():
            ours, theirs = avg[("ringleader", w, load)], avg[("pollux", w, load)]
            table.append(
                {
                    "workload": w,
                    "load": load,
                    "ringleader_s": ours,
                    "pollux_s": theirs,
                    "tiresias_s": avg[("tiresias", w, load)],
                    "pollux_shortest_s": avg[("pollux-shortest", w, load)],
                    "over_pollux": round(ours / theirs, 4),
                    "over_tiresias": round(ours / avg[("tiresias", w, load)], 4),
                    "shortest_over_pollux": round(avg[("pollux-shortest", w, load)] / theirs, 4),
                }
            )
    at_one = [t for t in table if t["load"] == "1.0"]
    worst = max((float(t["over_pollux"]) for t in at_one), default=None)  # type: ignore[arg-type]
    means = {}
    for load in loads:
        mine = [t for t in table if t["load"] == load]
        means[load] = {
            f"{p.replace('-', '_')}_s": round(
                sum(float(t[f"{p.replace('-', '_')}_s"]) for t in mine) / len(mine),  # type: ignore[arg-type]
                1,
            )
            for p in POLICIES
        }
    p99 = (
        max(
            float(r["decision_ms"]["p99"])  # type: ignore[index]
            for r in rows
            if r["policy"] == "ringleader" and r["load"] == "1.0"
        )
        if "1.0" in loads
        else None
    )
    report = {
        **stamp("python bench/goodput.py"),
        "cluster": f"{pollux.NODES} x {pollux.GPUS_PER_NODE} GPUs",
        "wall_s": round(time.perf_counter() - started, 1),
        "goals": {
            "worst_over_pollux_at_load_1": worst,
            "goal": GOAL_AT_LOAD_1,
            "met": worst is not None and worst <= GOAL_AT_LOAD_1,
            "never_worse_than_pollux": all(float(t["over_pollux"]) <= 1.0 for t in table),  # type: ignore[arg-type]
            "decision_p99_ms_at_load_1": p99,
            "decision_goal_ms": DECISION_GOAL_MS,
        },
        "means": means,
        "table": table,
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(
        f"{'load':>4s} {'workload':11s} {'default':>8s} {'pollux':>8s} {'tiresias':>8s} "
        f"{'shortest':>8s} /pollux shortest/pollux"
    )
    for t in table:
        print(
            f"{t['load']:>4s} {t['workload']:11s} {t['ringleader_s']:8.0f} {t['pollux_s']:8.0f} "
            f"{t['tiresias_s']:8.0f} {t['pollux_shortest_s']:8.0f} {t['over_pollux']} "
            f"{t['shortest_over_pollux']}"
        )
    for load, m in means.items():
        print(f"mean at {load}: " + ", ".join(f"{k} {v:.0f}" for k, v in m.items()))


if __name__ == "__main__":
    main()
