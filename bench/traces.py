"""The eight ITP clusters under FIFO, Tiresias and ringleader's default stack.

Each cluster at its recommended size (``ringleader.traces.jobs.recommended_gpus``),
speed model ``resnet110-shape``. Writes bench/results/traces.json: average JCT
(s) and simulation wall time per cluster and policy, plus whether the default
beat Tiresias and was never worse than FIFO.

Then ITP cluster07 (12.7k jobs) under every policy, each as a whole process
(``ringleader simulate --trace itp:cluster07 --policy NAME``, start-up and the
trace's loading included), as issue 19's goal of 6 s under any policy is put:
``every_policy`` in the file. ``--no-every-policy`` leaves it out.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import calibrated, results_file, stamp, trace_workload
from ringleader.policy import policy_named
from ringleader.policy.catalog import POLICY_NAMES
from ringleader.sim import Simulator
from ringleader.traces.load import available_traces

OUT = results_file("traces")
POLICIES = ("fifo", "tiresias", "ringleader")
EVERY_POLICY_TRACE = "itp:cluster07"


def whole_process(trace: str, policy: str) -> dict[str, Any]:
    """One ``ringleader simulate`` run as a user starts it, timed from outside, with its
    seconds as a ratio to the calibration loop run beside it (``_common.calibrated``)."""

    def timed() -> tuple[float, dict[str, Any]]:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "run.json"
            started = time.perf_counter()
            command = [sys.executable, "-m", "ringleader", "simulate", "--trace", trace]
            subprocess.run(
                [*command, "--policy", policy, "--json", str(out)],
                check=True,
                stdout=subprocess.DEVNULL,
                env=os.environ,
            )
            wall = time.perf_counter() - started
            return wall, json.loads(out.read_text())

    (wall, run), calibration = calibrated(timed)
    return {
        "avg_jct_s": round(run["avg_jct_s"], 1),
        "decisions": run["decisions"],
        "process_s": round(wall, 2),
        "simulation_s": run["wall_s"],
        "calibration_s": calibration,
        "process_calibrations": round(wall / calibration, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--no-every-policy",
        dest="every_policy",
        action="store_false",
        help=f"skip {EVERY_POLICY_TRACE} under every policy (a few minutes)",
    )
    args = parser.parse_args()
    report: dict[str, Any] = {
        **stamp("python bench/traces.py"),
        "speed_model": "resnet110-shape",
        "clusters": {},
    }
    for name in [n for n in available_traces() if n.startswith("itp:")]:
        cluster, jobs = trace_workload(name)
        entry: dict[str, Any] = {"jobs": len(jobs), "gpus": cluster.capacity}
        for policy in POLICIES:
            started = time.perf_counter()
            result = Simulator(policy_named(policy), cluster, jobs).run()
            entry[policy] = {
                "avg_jct_s": round(result.summary.avg_jct_s, 1),
                "p99_jct_s": round(result.summary.p99_jct_s, 1),
                "utilization": round(result.summary.utilization, 4),
                "wall_s": round(time.perf_counter() - started, 2),
            }
        entry["beats_tiresias"] = entry["ringleader"]["avg_jct_s"] < entry["tiresias"]["avg_jct_s"]
        entry["not_worse_than_fifo"] = (
            entry["ringleader"]["avg_jct_s"] <= entry["fifo"]["avg_jct_s"]
        )
        report["clusters"][name] = entry
        print(name, json.dumps(entry), file=sys.stderr, flush=True)
    if args.every_policy:
        every: dict[str, Any] = {}
        for policy in POLICY_NAMES:
            every[policy] = whole_process(EVERY_POLICY_TRACE, policy)
            print(EVERY_POLICY_TRACE, policy, json.dumps(every[policy]), file=sys.stderr)
        report["every_policy"] = {"trace": EVERY_POLICY_TRACE, "runs": every}
    clusters = report["clusters"].values()
    report["beats_tiresias_on"] = sum(e["beats_tiresias"] for e in clusters)
    report["never_worse_than_fifo"] = all(e["not_worse_than_fifo"] for e in clusters)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: v for k, v in report.items() if k != "clusters"}, indent=2))


if __name__ == "__main__":
    main()
