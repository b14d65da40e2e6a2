"""Does the simulator predict the runtime? ``examples/fidelity.yaml``, real and replayed.

Runs ``ringleader fidelity`` on the example workload (9 real jobs on 4
virtual devices, staggered arrivals, elastic and fixed sizes, a burst that
oversubscribes the devices) under ``elastic`` and ``time-slicing``, then
records per policy the real and simulated average JCT, their ratio and each
job's pair. Goal: |sim/real − 1| ≤ 5 % on average JCT for both policies.

Writes bench/results/fidelity.json (and fidelity.png beside it).

``--executor slurm``: the same on the Slurm lab (``ringleader.slurm.lab``, two
nodes of two virtual GPUs), ``ringleader fidelity --executor slurm`` run on its
controller host; writes fidelity-slurm.json and fidelity-slurm.png. Needs root
and Slurm (``make slurm``).

``--workload examples/goodput.yaml``: the jobs that adapt their batch (three
classifiers and a fixed ResNet-20 under the default policy, ``ringleader``);
writes fidelity-goodput.json and fidelity-goodput.png.

``--repeat N``: N runs, each error recorded (``runs``), their mean as
``avg_jct_error``; met only if every run is within the goal. A Slurm start
(sbatch, srun, a cold interpreter) varies from run to run more than a local one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from _common import calibration_s, stamp

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "results" / "fidelity.json"
PLOT = ROOT / "bench" / "results" / "fidelity.png"
WORKLOAD = ROOT / "examples" / "fidelity.yaml"
GOAL = 0.05


@contextlib.contextmanager
def _where(executor: str) -> Iterator[Callable[[list[str]], None]]:
    """How to run a command where the executor's jobs can be started: here, or on the
    Slurm lab's controller host for as long as the lab is up."""
    if executor == "local":

        def here(argv: list[str]) -> None:
            subprocess.run(argv, check=True, cwd=ROOT)

        yield here
        return
    from ringleader.slurm.conf import LabShape
    from ringleader.slurm.lab import SlurmLab

    root = Path("/run") / f"rl-bench-fidelity-{os.getpid()}"
    with SlurmLab(LabShape(nodes=2, gpus_per_node=2), root) as lab:

        def run(argv: list[str]) -> None:
            done = lab.run(argv, timeout=3600)
            sys.stderr.write(done.stderr)
            if done.returncode:
                raise SystemExit(f"fidelity failed on the Slurm lab (exit {done.returncode})")

        yield run
    shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executor", choices=("local", "slurm"), default="local")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run the workload this many times (each real run, then its replay); "
        "the goal is met only if every run meets it",
    )
    parser.add_argument(
        "--workload",
        type=Path,
        default=WORKLOAD,
        help="a fidelity workload file (default: examples/fidelity.yaml); another one's "
        "results are named after it (fidelity-goodput.json for examples/goodput.yaml)",
    )
    args = parser.parse_args()
    workload = args.workload.resolve()
    suffix = "" if args.executor == "local" else f"-{args.executor}"
    if workload != WORKLOAD:
        suffix += f"-{workload.stem}"
    out = OUT.with_name(f"fidelity{suffix}.json")
    plot = PLOT.with_name(f"fidelity{suffix}.png")
    calibration = calibration_s()
    runs, started = [], time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-fidelity-") as tmp, _where(args.executor) as run:
        for i in range(args.repeat):
            raw = Path(tmp) / f"fidelity-{i}.json"
            run(
                [
                    *(sys.executable, "-m", "ringleader", "fidelity", str(workload)),
                    *("--executor", args.executor, "--json", str(raw), "--plot", str(plot)),
                    *("--work-dir", str(Path(tmp) / f"runs-{i}")),
                    # No sharing policy on Slurm: a job there keeps its GPUs until it exits.
                    *(("--policies", "elastic") if args.executor == "slurm" else ()),
                ]
            )
            runs.append(json.loads(raw.read_text())["policies"])
    wall = time.monotonic() - started
    errors = {name: [r[name]["avg_jct_error"] for r in runs] for name in runs[-1]}
    report = {
        **stamp("python bench/fidelity.py"),
        "command": (
            f"python bench/fidelity.py"
            f"{f' --executor {args.executor}' if args.executor != 'local' else ''}"
            f"{f' --repeat {args.repeat}' if args.repeat > 1 else ''}"
            f"{f' --workload {workload.relative_to(ROOT)}' if workload != WORKLOAD else ''}  "
            f"(ringleader fidelity {workload.relative_to(ROOT)} --executor {args.executor})"
        ),
        "executor": args.executor,
        "goal": f"|sim/real - 1| <= {GOAL:.0%} on average JCT for every policy, in every run",
        "met": all(abs(e) <= GOAL for each in errors.values() for e in each),
        "avg_jct_error": {name: round(sum(e) / len(e), 4) for name, e in errors.items()},
        "runs": [
            {
                name: {k: p[k] for k in ("avg_jct_error", "real_avg_jct_s", "sim_avg_jct_s")}
                for name, p in policies.items()
            }
            for policies in runs
        ],
        "wall_s": round(wall, 1),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "calibration_s": calibration,
        },
        "policies": runs[-1],  # the last run's jobs, measures and counts (the plot's)
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({"avg_jct_error": errors, "met": report["met"], "wall_s": report["wall_s"]}))


if __name__ == "__main__":
    main()
