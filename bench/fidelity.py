"""Does the simulator predict the runtime? ``examples/fidelity.yaml``, real and replayed.

Runs ``ringleader fidelity`` on the example workload (9 real jobs on 4
virtual devices, staggered arrivals, elastic and fixed sizes, a burst that
oversubscribes the devices) under ``elastic`` and ``time-slicing``, then
records per policy the real and simulated average JCT, their ratio and each
job's pair. Goal: |sim/real − 1| ≤ 5 % on average JCT for both policies.

Writes bench/results/fidelity.json (and fidelity.png beside it).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import calibration_s, stamp

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "results" / "fidelity.json"
PLOT = ROOT / "bench" / "results" / "fidelity.png"
WORKLOAD = ROOT / "examples" / "fidelity.yaml"
GOAL = 0.05


def main() -> None:
    calibration = calibration_s()
    with tempfile.TemporaryDirectory(prefix="bench-fidelity-") as tmp:
        raw = Path(tmp) / "fidelity.json"
        started = time.monotonic()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "ringleader",
                "fidelity",
                str(WORKLOAD),
                "--json",
                str(raw),
                "--plot",
                str(PLOT),
                "--work-dir",
                str(Path(tmp) / "runs"),
            ],
            check=True,
            cwd=ROOT,
        )
        wall = time.monotonic() - started
        result = json.loads(raw.read_text())
    errors = {name: p["avg_jct_error"] for name, p in result["policies"].items()}
    report = {
        **stamp("python bench/fidelity.py"),
        "command": "python bench/fidelity.py  (ringleader fidelity examples/fidelity.yaml)",
        "goal": f"|sim/real - 1| <= {GOAL:.0%} on average JCT for every policy",
        "met": all(abs(e) <= GOAL for e in errors.values()),
        "avg_jct_error": errors,
        "wall_s": round(wall, 1),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "calibration_s": calibration,
        },
        "policies": result["policies"],
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({"avg_jct_error": errors, "met": report["met"], "wall_s": report["wall_s"]}))


if __name__ == "__main__":
    main()
