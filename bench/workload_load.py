"""How fast a workload file loads: jobs per second, as YAML and as JSON, up to a million jobs.

Each file lists ``N`` jobs of five fields (name, model, submit time, GPUs, max
GPUs), as a generated workload would, on a cluster wide enough for all of them.
``load_workload`` reads, parses, validates and builds the simulator's jobs; the
time is the median of ``REPEAT`` loads in this process, with the calibration loop
just before and after. Issue 59's target: 100,000 jobs/s, and a file of a
million jobs accepted. Writes bench/results/workload-load.json.
"""

from __future__ import annotations

import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from _common import calibrated, results_file, stamp
from ringleader.sim.workload_file import MAX_FILE_BYTES, MAX_YAML_BYTES, load_workload

TARGET_JOBS_PER_S = 100_000
CASES = (("yaml", 20_000, 3), ("json", 20_000, 3), ("yaml", 200_000, 1), ("json", 1_000_000, 1))
"""(format, jobs, repeats)."""


def workload(jobs: int) -> dict[str, Any]:
    rng = random.Random(1)
    now = 0.0
    listed = []
    for i in range(jobs):
        now += rng.expovariate(1 / 30)
        listed.append(
            {
                "name": f"job-{i}",
                "model": "resnet110",
                "submit_s": round(now, 1),
                "gpus": rng.choice((1, 2, 4)),
                "max_gpus": 8,
            }
        )
    return {"cluster": {"nodes": 1250, "gpus_per_node": 8}, "jobs": listed}


def write(path: Path, data: dict[str, Any], fmt: str) -> None:
    with path.open("w") as f:
        if fmt == "json":
            json.dump(data, f)
        else:
            yaml.dump(data, f, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper))


def main() -> None:
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-load-") as tmp:
        for fmt, jobs, repeat in CASES:
            path = Path(tmp) / f"w{jobs}.{fmt}"
            write(path, workload(jobs), fmt)

            def loads(path: Path = path, repeat: int = repeat) -> list[float]:
                times = []
                for _ in range(repeat):
                    started = time.perf_counter()
                    loaded = load_workload(path)
                    times.append(time.perf_counter() - started)
                    del loaded
                return times

            times, loop_s = calibrated(loads)
            median = statistics.median(times)
            row = {
                "format": fmt,
                "jobs": jobs,
                "file_bytes": path.stat().st_size,
                "median_s": round(median, 3),
                "jobs_per_s": round(jobs / median),
                "runs": len(times),
                "calibration_s": loop_s,
            }
            rows.append(row)
            print(f"{fmt:4s} {jobs:>9,} jobs  {median:7.2f} s  {row['jobs_per_s']:>8,} jobs/s")
    report = {
        **stamp("python bench/workload_load.py"),
        "what": __doc__.splitlines()[0],
        "caps_bytes": {"json": MAX_FILE_BYTES, "yaml": MAX_YAML_BYTES},
        "target_jobs_per_s": TARGET_JOBS_PER_S,
        "cases": rows,
        "met": {f"{r['format']}_{r['jobs']}": r["jobs_per_s"] >= TARGET_JOBS_PER_S for r in rows},
    }
    out = results_file("workload-load")
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({"file": str(out)}))


if __name__ == "__main__":
    main()
