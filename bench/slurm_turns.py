"""Time-slicing on Slurm: what a turn costs two jobs sharing one node's GPUs.

On a Slurm lab of one node with 2 virtual GPUs, a server (``--slurm-partition
share --policy time-slicing --quantum-s 4``) runs two ResNet-8 jobs of 2 GPUs
each, so they must take turns (``ringleader.slurm.turns``). Per suspend and
resume, seconds from the server's request: to the job library's ``suspended``
(the GPUs free for the other job), to slurmctld's suspend of the job (asked
1.5 s into the pause), and to the library's ``resumed`` (``scontrol resume``
first). Then packing: two 1-GPU jobs under ``gandiva --quantum-s 5`` on a
lab of one 1-GPU node, for how long both ran at once (``turns.pack``). Last,
ten resumes asked 0.3 s after ``scontrol suspend``, while slurmstepd still
holds a resume back (``turns.resumes_within_a_suspend``). Writes
``bench/results/slurm-turns.json``. Needs root and Slurm (``make slurm``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from _common import stamp
from ringleader.slurm import turns
from ringleader.slurm.conf import LabShape
from ringleader.slurm.drill import Served, served
from ringleader.slurm.lab import SlurmLab

OUT = Path(__file__).parent / "results" / "slurm-turns.json"
SHARED = ("--slurm-partition", "share", "--policy", "time-slicing", "--quantum-s", "4")
JOB = (
    *(sys.executable, "-m", "ringleader.workloads.resnet", "--depth", "8", "--image-size", "8"),
    *("--batch", "16", "--examples-per-epoch", "256", "--epochs", "30"),
    *("--checkpoint-every-s", "2"),
)
KEYS = ("suspend_s", "slurm_suspend_s", "resume_s")


def on_lab(
    i: int, gpus: int, flags: Sequence[str], drill: Callable[[Served, Path], dict[str, Any]]
) -> dict[str, Any]:
    """``drill`` on a fresh lab of one node of ``gpus`` GPUs, its server given ``flags``."""
    root = Path("/run") / f"rl-turns-{os.getpid()}-{i}"
    with tempfile.TemporaryDirectory(prefix="rl-turns-") as tmp:
        base = Path(tmp)
        with (
            SlurmLab(LabShape(nodes=1, gpus_per_node=gpus), root) as lab,
            served(lab, base / "state", base / "server.log", more=flags) as here,
        ):
            seen = drill(here, base)
    shutil.rmtree(root, ignore_errors=True)
    return seen


def one_run(i: int) -> dict[str, Any]:
    return on_lab(i, 2, SHARED, lambda here, base: turns.take_turns(here, JOB, base))


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in KEYS:
        values = sorted(v for run in runs for job in run["jobs"] for v in run[job][key])
        out[key] = {
            "count": len(values),
            "median": round(statistics.median(values), 3) if values else None,
            "max": max(values) if values else None,
        }
    out["succeeded"] = sum(set(r["states"].values()) == {"succeeded"} for r in runs)
    out["runs"] = len(runs)
    return out


PACKING = ("--slurm-partition", "share", "--policy", "gandiva", "--quantum-s", "5")
PACKED_JOB = (*JOB[:-4], "--epochs", "120", "--checkpoint-every-s", "1")


def packing_run(i: int) -> dict[str, Any]:
    """Two 1-GPU jobs under ``gandiva`` on a lab of one 1-GPU node (``turns.pack``)."""
    return on_lab(i, 1, PACKING, lambda here, base: turns.pack(here, PACKED_JOB, base))


def within_suspend_run(i: int) -> list[float]:
    """Resumes asked 0.3 s after ``scontrol suspend``, while slurmstepd still holds
    them back (``turns.resumes_within_a_suspend``), on a lab of one 1-GPU node."""
    trainer = [*JOB[:-4], "--epochs", "1000", "--checkpoint-every-s", "1e9"]
    return on_lab(
        i,
        1,
        SHARED,
        lambda here, base: turns.resumes_within_a_suspend(here.lab, trainer, base, times=10),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    runs = [one_run(i) for i in range(args.repeat)]
    packing = [packing_run(i) for i in range(args.repeat)]
    within = within_suspend_run(args.repeat)
    for run in packing:
        print(f"packing: {json.dumps(run)}", file=sys.stderr, flush=True)
    report: dict[str, Any] = stamp(f"python bench/slurm_turns.py --repeat {args.repeat}")
    report |= {"goal_s": 1.0, "summary": summary(runs), "runs": runs}
    report["resume_within_suspend_s"] = {
        "what": "a resume asked 0.3 s after scontrol suspend of a job the library suspended",
        "count": len(within),
        "median": round(statistics.median(within), 3),
        "max": max(within),
        "each": within,
    }
    report["packing"] = {
        "what": "two 1-GPU jobs under gandiva on one 1-GPU node of the share partition",
        "packed_s": [run["packed_s"] for run in packing],
        "succeeded": sum(set(r["states"].values()) == {"succeeded"} for r in packing),
        "runs": packing,
    }
    OUT.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["summary"], indent=2))
    print("packed_s", report["packing"]["packed_s"], "succeeded", report["packing"]["succeeded"])


if __name__ == "__main__":
    main()
