"""The eight ITP clusters under FIFO, Tiresias and ringleader's default stack.

Each cluster at its recommended size (``ringleader.traces.jobs.recommended_gpus``),
speed model ``resnet110-shape``. Writes bench/results/traces.json: average JCT
(s) and simulation wall time per cluster and policy, plus whether the default
beat Tiresias and was never worse than FIFO.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from _common import results_file, stamp, trace_workload
from ringleader.policy import policy_named
from ringleader.sim import Simulator
from ringleader.traces.load import available_traces

OUT = results_file("traces")
POLICIES = ("fifo", "tiresias", "ringleader")


def main() -> None:
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
    clusters = report["clusters"].values()
    report["beats_tiresias_on"] = sum(e["beats_tiresias"] for e in clusters)
    report["never_worse_than_fifo"] = all(e["not_worse_than_fifo"] for e in clusters)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: v for k, v in report.items() if k != "clusters"}, indent=2))


if __name__ == "__main__":
    main()
