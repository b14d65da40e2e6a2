"""TensorLights in namespaces: FIFO, One and RoundRobin, skewed and uniform PS placement.

Runs ``ringleader netlab`` (3 PS jobs × 4 workers, 100 Mbit PS uplinks, 500 KB
model updates per worker, 50 ms compute, 30 steps) with 3 repetitions each and
writes bench/results/netlab.json with each configuration's ``avg_jct_s``,
``barrier_wait_var`` and ``repetitions``, plus One/FIFO and RR/FIFO ratios.
Needs root (network namespaces and tc).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from _common import stamp
from ringleader.net.netlab import NetlabConfig, run_netlab
from ringleader.net.tc import have_net_admin
from ringleader.policy.traffic import TrafficPolicy

OUT = Path(__file__).parent / "results" / "netlab.json"
REPEAT = 3


def main() -> None:
    ok, why = have_net_admin()
    if not ok:
        print(json.dumps({"skipped": why}))
        return
    report: dict[str, Any] = {**stamp("python bench/netlab.py"), "repeat": REPEAT}
    for placement in ("skewed", "uniform"):
        rows = {}
        for policy in TrafficPolicy:
            config = NetlabConfig(policy, placement=placement)  # type: ignore[arg-type]
            rows[policy.value] = run_netlab(config, REPEAT)
            print(
                f"{placement} {policy.value}: {rows[policy.value]['avg_jct_s']:.2f} s",
                file=sys.stderr,
                flush=True,
            )
        fifo = rows["fifo"]["avg_jct_s"]
        report[placement] = {
            **rows,
            "one_over_fifo": rows["one"]["avg_jct_s"] / fifo,
            "rr_over_fifo": rows["rr"]["avg_jct_s"] / fifo,
            "barrier_var_one_over_fifo": rows["one"]["barrier_wait_var"]
            / rows["fifo"]["barrier_wait_var"],
        }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2) + "\n")
    print(
        json.dumps(
            {p: {k: v for k, v in report[p].items() if "over" in k} for p in ("skewed", "uniform")},
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
