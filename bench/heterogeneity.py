"""Type-aware against type-agnostic policies on Gavel's heterogeneous cluster.

Writes ``bench/results/heterogeneity.json`` and ``docs/img/heterogeneity.png``:
average JCT, makespan, fairness and stability of LAS (``tiresias``) and the
default policy (``ringleader``), each with the type-aware and the type-agnostic
place stage, on 36 GPUs (12 V100, 12 P100, 12 K80), Poisson arrivals of
Gavel's job types at a sweep of loads (``ringleader.scenarios.heterogeneity``).

The goals (issue 18): at the highest load where a policy's agnostic variant
keeps up, its type-aware variant's average JCT is at most 0.6× the agnostic's;
and the type-aware default beats type-aware LAS.

    python bench/heterogeneity.py [--seeds N] [--processes N]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from _common import stamp
from ringleader.report.plots import heterogeneity_plot
from ringleader.scenarios.heterogeneity import LOADS, POLICIES, Setup, goals, run_heterogeneity

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "results" / "heterogeneity.json"
PLOT = ROOT / "docs" / "img" / "heterogeneity.png"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--processes", type=int, default=None)
    args = parser.parse_args()
    setup = Setup()
    started = time.perf_counter()
    cells = run_heterogeneity(args.seeds, LOADS, POLICIES, setup, processes=args.processes)
    wall = time.perf_counter() - started
    results = [c.as_dict() for c in cells]
    report = {
        **stamp(f"python bench/heterogeneity.py --seeds {args.seeds}"),
        "cluster": {"v100": 12, "p100": 12, "k80": 12},
        "jobs_per_run": setup.jobs,
        "restart_delay_s": setup.restart_delay_s,
        "seeds": args.seeds,
        "wall_s": round(wall, 1),
        "results": results,
        "goals": goals(cells),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2) + "\n")
    heterogeneity_plot(results, PLOT)
    print(json.dumps(report["goals"], indent=2))
    print(f"wrote {OUT} and {PLOT} in {wall:.0f} s")


if __name__ == "__main__":
    main()
