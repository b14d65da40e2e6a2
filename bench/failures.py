"""Failures survived: what a node that dies under a job costs it, per executor.

On the Slurm lab (3 nodes of 2 virtual GPUs, ``ringleader.slurm.lab``) a server
runs one elastic ResNet-8 job on 4 GPUs (2..4), checkpointing every 5 s; once
it has a checkpoint, one of its two nodes loses power (``SlurmLab.fail_node``)
and the job must finish on what is left (``ringleader.slurm.drill``). Per
repetition, in seconds from the failure: when the server noticed
(``noticed_s``), when the job took a step again (``trains_again_s``), and the
steps it lost (last step before the failure minus the step it restored).
Writes ``bench/results/failures.json``. Needs root (namespaces) and Slurm
(``make slurm``).

Only the Slurm executor is measured so far: a node cannot die under the local
executor (one host), and Ray's nodes are not yet failed here.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from _common import stamp
from ringleader.slurm.conf import LabShape
from ringleader.slurm.drill import node_failure, served
from ringleader.slurm.lab import SlurmLab, missing_tools

OUT = Path(__file__).parent / "results" / "failures.json"
CHECKPOINT_EVERY_S = 5
JOB = (
    *(sys.executable, "-m", "ringleader.workloads.resnet", "--depth", "8", "--epochs", "6"),
    *("--examples-per-epoch", "2048", "--batch", "32"),
    *("--checkpoint-every-s", str(CHECKPOINT_EVERY_S)),
)


def slurm_node(repeat: int) -> dict[str, Any]:
    runs = []
    for i in range(repeat):
        root = Path("/run") / f"rl-failures-{os.getpid()}-{i}"
        with tempfile.TemporaryDirectory(prefix="rl-failures-") as tmp:
            base = Path(tmp)
            with (
                SlurmLab(LabShape(nodes=3, gpus_per_node=2), root) as lab,
                served(lab, base / "state", base / "server.log") as here,
            ):
                cost = node_failure(here, JOB, base)
            shutil.rmtree(root, ignore_errors=True)
        cost["lost_s"] = round(cost["steps_lost"] * cost["step_s"], 2)
        print(f"slurm node {i}: {json.dumps(cost)}", file=sys.stderr, flush=True)
        runs.append(cost)
    median = {
        key: statistics.median(r[key] for r in runs)
        for key in ("noticed_s", "trains_again_s", "steps_lost", "lost_s")
    }
    return {
        "what": "a node of a 4-GPU job loses power",
        "checkpoint_every_s": CHECKPOINT_EVERY_S,
        "runs": runs,
        "median": median,
        "all_succeeded": all(r["state"] == "succeeded" for r in runs),
        "lost_at_most_one_interval": all(
            r["lost_s"] <= CHECKPOINT_EVERY_S + 2 * r["step_s"] for r in runs
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if os.geteuid() != 0 or missing_tools():
        print(json.dumps({"skipped": "needs root and Slurm (make slurm)"}))
        return
    report: dict[str, Any] = stamp(f"python bench/failures.py --repeat {args.repeat}")
    report["slurm"] = {"node": slurm_node(args.repeat)}
    OUT.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["slurm"]["node"]["median"]))


if __name__ == "__main__":
    main()
