"""Failures survived: what a node or a worker that dies under a job costs it, per executor.

On the Slurm lab (3 nodes of 2 virtual GPUs, ``ringleader.slurm.lab``) a server
runs one elastic ResNet-8 job on 4 GPUs (2..4), checkpointing every 5 s. Half
an interval after its first checkpoint (what a failure at a random moment
costs on average), one of its two nodes loses power (``SlurmLab.fail_node``),
and the job must finish on what is left (``ringleader.slurm.drill``). In a
second drill the same job, with ``stall_s`` 10 s, has rank 1's training
process stopped at that moment (SIGSTOP: a rank that hangs). Per repetition,
in seconds from the failure: when the server noticed (``noticed_s``), when
the job took a step again (``trains_again_s``), and the steps it lost (the
first generation's last step minus the step the next one restored).
Writes ``bench/results/failures.json``. Needs root (namespaces) and Slurm
(``make slurm``).

Under the local executor a node cannot die (it is one host); what can is a
worker: the same job on 2 GPUs of a local server, rank 1's training process
gets SIGKILL at the same moment. ``noticed_s`` is then the
server's log line saying a worker failed. A rank that hangs is the same
process stopped (SIGSTOP: alive, no step) under ``stall_s`` 10 s; noticed
when the server says it has had no new step. On Ray (a head and two worker
nodes with fake GPUs, in a network namespace with only loopback) the job's
worker node is removed (``tests/ray_node_loss.py``); noticed when the server
settles the job.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from _common import stamp
from ringleader.runtime.local_server import local_server
from ringleader.slurm.conf import LabShape
from ringleader.slurm.drill import (
    cost,
    node_failure,
    noticed,
    rank_fault,
    served,
    steps,
    training_process,
    wait,
)
from ringleader.slurm.lab import SlurmLab, missing_tools

OUT = Path(__file__).parent / "results" / "failures.json"
ROOT = Path(__file__).resolve().parent.parent
CHECKPOINT_EVERY_S = 5
STALL_S = 10.0
"""The local job's ``stall_s``: how long it may go without a step before it is taken to hang."""
JOB = (
    *(sys.executable, "-m", "ringleader.workloads.resnet", "--depth", "8", "--epochs", "6"),
    *("--examples-per-epoch", "2048", "--batch", "32"),
    *("--checkpoint-every-s", str(CHECKPOINT_EVERY_S)),
)


SLURM_FAULTS = {
    "node": "a node of a 4-GPU job loses power",
    "worker": "rank 1's training process of a 4-GPU job gets SIGKILL",
    "hang": f"rank 1's training process of a 4-GPU job stops (SIGSTOP), stall_s {STALL_S:g}",
}


def slurm_fault(fault: str, repeat: int) -> dict[str, Any]:
    runs = []
    for i in range(repeat):
        root = Path("/run") / f"rl-failures-{os.getpid()}-{i}"
        with tempfile.TemporaryDirectory(prefix="rl-failures-") as tmp:
            base = Path(tmp)
            with (
                SlurmLab(LabShape(nodes=3, gpus_per_node=2), root) as lab,
                served(lab, base / "state", base / "server.log") as here,
            ):
                if fault == "node":
                    cost = node_failure(here, JOB, base, CHECKPOINT_EVERY_S / 2)
                else:
                    how = "kill" if fault == "worker" else "hang"
                    cost = rank_fault(here, JOB, base, how, STALL_S, CHECKPOINT_EVERY_S / 2)
            shutil.rmtree(root, ignore_errors=True)
        print(f"slurm {fault} {i}: {json.dumps(cost)}", file=sys.stderr, flush=True)
        runs.append(cost)
    return summary(runs, SLURM_FAULTS[fault])


RAY_FAULTS = {
    "node": "a Ray worker node of a 2-GPU job is removed",
    "worker": "rank 1's training process of a 2-GPU job on Ray gets SIGKILL",
    "hang": f"rank 1's training process of a 2-GPU job on Ray stops (SIGSTOP), stall_s {STALL_S:g}",
}


def ray_fault(fault: str, repeat: int) -> dict[str, Any]:
    """The same job on 2 GPUs of a Ray cluster (``tests/ray_node_loss.py``, in a network
    namespace with only loopback, as Ray must run here): its node is removed, or its
    rank 1 hangs."""
    namespace = f"rlfail{os.getpid()}"
    command = " ".join(JOB).replace("--epochs 6", "--epochs 30").replace(sys.executable, "python")
    with tempfile.TemporaryDirectory(prefix="rl-failures-ray-") as tmp:
        out = Path(tmp) / "ray.json"
        subprocess.run(["ip", "netns", "add", namespace], check=True)
        try:
            inside = ["ip", "netns", "exec", namespace]
            subprocess.run([*inside, "ip", "link", "set", "lo", "up"], check=True)
            subprocess.run(
                [
                    *inside,
                    sys.executable,
                    "-m",
                    "tests.ray_node_loss",
                    *("--fault", fault),
                    str(out),
                    str(repeat),
                    command,
                ],
                cwd=ROOT,
                env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": str(ROOT)},
                timeout=300 * repeat + 120,
                check=False,
            )
        finally:
            subprocess.run(["ip", "netns", "del", namespace], check=False)
        runs = json.loads(out.read_text())["runs"]
    for i, run in enumerate(runs):
        print(f"ray {fault} {i}: {json.dumps(run)}", file=sys.stderr, flush=True)
    broken = [r["error"] for r in runs if "error" in r]
    if broken:
        raise RuntimeError(f"a Ray run failed:\n{broken[0]}")
    return summary(runs, RAY_FAULTS[fault])


def summary(runs: list[dict[str, Any]], what: str) -> dict[str, Any]:
    for run in runs:
        run["lost_s"] = round(run["steps_lost"] * run["step_s"], 2)
    return {
        "what": what,
        "checkpoint_every_s": CHECKPOINT_EVERY_S,
        "runs": runs,
        "median": {
            key: statistics.median(r[key] for r in runs)
            for key in ("noticed_s", "trains_again_s", "steps_lost", "lost_s")
        },
        "all_succeeded": all(r["state"] == "succeeded" for r in runs),
        "lost_at_most_one_interval": all(
            r["lost_s"] <= CHECKPOINT_EVERY_S + 2 * r["step_s"] for r in runs
        ),
    }


FAULTS: dict[str, tuple[signal.Signals, str, str]] = {
    "worker": (
        signal.SIGKILL,
        "rank 1's training process of a 2-GPU job gets SIGKILL",
        "a worker failed",
    ),
    "hang": (
        signal.SIGSTOP,
        f"rank 1's training process of a 2-GPU job stops (SIGSTOP), stall_s {STALL_S:g}",
        "no new step",
    ),
}
"""Each local fault: the signal rank 1's process gets, what it is, what the log says."""


def local_fault(fault: str, repeat: int) -> dict[str, Any]:
    runs = []
    for i in range(repeat):
        with tempfile.TemporaryDirectory(prefix="rl-failures-") as tmp:
            runs.append(_fault_a_worker(Path(tmp), fault))
        print(f"local {fault} {i}: {json.dumps(runs[-1])}", file=sys.stderr, flush=True)
    return summary(runs, FAULTS[fault][1])


def _fault_a_worker(base: Path, fault: str) -> dict[str, Any]:
    sent, _, said = FAULTS[fault]
    state, log = base / "state", base / "server.log"
    with local_server(gpus=4, state_dir=state, log=log, round_s=2, policy="elastic") as s:
        api = s.client()
        # Longer than on Slurm: 2 GPUs on one host run the 6 epochs before any fault.
        longer = " ".join(JOB).replace("--epochs 6", "--epochs 30")
        command = longer.replace(sys.executable, "python")
        spec = {"name": "victim", "command": command, "gpus": 2, "stall_s": STALL_S}
        made = api.post("/jobs", json=spec)
        made.raise_for_status()
        job = made.json()["id"]
        kept = state / "jobs" / job / "checkpoints"
        wait("checkpoint", lambda: kept.is_dir() and any(kept.iterdir()), 120)
        time.sleep(CHECKPOINT_EVERY_S / 2)
        pid = training_process(state, job, 1)
        failed_at, done = time.time(), steps(state, job, 1)
        os.kill(pid, sent)

        def ended() -> bool:
            return api.get(f"/jobs/{job}").json()["state"] in ("succeeded", "failed")

        wait("end of the job", ended, 300)
        row = api.get(f"/jobs/{job}").json()
    return {
        "job": job,
        "state": row["state"],
        "attempts": row.get("attempts"),
        "noticed_s": noticed(log, failed_at, said),
        **cost(state, job, failed_at, done),
    }


CASES: dict[str, Callable[[str, int], dict[str, Any]]] = {
    "local": local_fault,
    "slurm": slurm_fault,
    "ray": ray_fault,
}
"""Each executor's drill, by the faults it has (``FAULTS``, ``SLURM_FAULTS``, ``RAY_FAULTS``)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--only",
        action="append",
        metavar="EXECUTOR.FAULT",
        help="run only this case (e.g. ray.hang), kept beside the file's others; repeatable",
    )
    args = parser.parse_args()
    if os.geteuid() != 0 or missing_tools():
        print(json.dumps({"skipped": "needs root and Slurm (make slurm)"}))
        return
    every: dict[str, Iterable[str]] = {"local": FAULTS, "slurm": SLURM_FAULTS, "ray": RAY_FAULTS}
    cases = [(ex, fault) for ex, faults in every.items() for fault in faults]
    if args.only:
        unknown = set(args.only) - {f"{ex}.{fault}" for ex, fault in cases}
        if unknown:
            parser.error(f"--only: no case {', '.join(sorted(unknown))}")
        cases = [(ex, fault) for ex, fault in cases if f"{ex}.{fault}" in args.only]
    command = f"python bench/failures.py --repeat {args.repeat}"
    report: dict[str, Any] = json.loads(OUT.read_text()) if args.only else {}
    for executor, fault in cases:
        measured = CASES[executor](fault, args.repeat)
        measured["measured"] = stamp(f"{command} --only {executor}.{fault}")
        report.setdefault(executor, {})[fault] = measured
    if not args.only:
        report = {**stamp(command), **report}
    OUT.write_text(json.dumps(report, indent=2) + "\n")
    for executor, fault in cases:
        print(executor, fault, json.dumps(report[executor][fault]["median"]))


if __name__ == "__main__":
    main()
