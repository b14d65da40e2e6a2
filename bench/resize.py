"""Checkpoint → stop → restart at a new world size, split into its phases.

For ResNet-20 and ResNet-110 (CIFAR-shaped, 16 images per worker), 5 runs
each: a job runs on 1 worker; we ask it to stop (the controller's control
file), it checkpoints at the next minibatch boundary and exits; we relaunch it
on 2 workers (gloo) through the local executor and wait until it has restored.
Phases, from the job's own timestamps:

* to_boundary: stop requested → the job sees it (the rest of the current minibatch)
* checkpoint_write: atomic checkpoint write (rank 0)
* process_exit: checkpoint written → every worker process has exited
* start_and_import: relaunch → the new processes have started Python and imported torch
  and the workload (and built the model)
* rendezvous: torch.distributed process group set up over the new world
* restore: checkpoint read and loaded

``total`` is stop request → restored. The controller's own reaction (its tick,
0.5 s by default) is not included: this measures the mechanism. Workers
are forked by the executor's fork server (torch imported in advance);
``cold`` repeats everything with it off.
Writes bench/results/resize.json.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import resnet_command, stamp, wait_until
from ringleader.job.control import PROGRESS, Action, Control, ProgressReader, write_control
from ringleader.policy.model.views import Device
from ringleader.runtime.workers.executor.local import LocalExecutor
from ringleader.runtime.workers.wrapper import run_dir

OUT = Path(__file__).parent / "results" / "resize.json"
RUNS = int(os.environ.get("RESIZE_RUNS", "5"))
PHASES = (
    "to_boundary",
    "checkpoint_write",
    "process_exit",
    "start_and_import",
    "rendezvous",
    "restore",
    "total",
)


def one_run(depth: int, executor: LocalExecutor) -> dict[str, float]:
    job_dir = Path(tempfile.mkdtemp(prefix=f"resize-r{depth}-"))
    command = resnet_command(depth, 16, 1000)
    records: list[dict[str, Any]] = []
    reader = ProgressReader(job_dir / PROGRESS)

    def seen(pred: Any) -> Any:
        records.extend(reader.read_new())
        return next((r for r in records if pred(r)), None)

    write_control(job_dir, Control(1, Action.RUN))
    executor.launch("bench", job_dir, 1, command, [Device("local", 0)], {})
    wait_until(lambda: seen(lambda r: r.get("g") == 1 and r.get("step", 0) >= 3 and "loss" in r))
    executor.warm.ready(60)  # no-op once the fork server has imported torch
    requested = time.time()
    write_control(job_dir, Control(1, Action.STOP))
    stopped = wait_until(lambda: seen(lambda r: r.get("event") == "stopped"))
    wait_until(lambda: executor.status(job_dir, 1, 1).finished)
    exited = max(p.stat().st_mtime for p in run_dir(job_dir, 1).glob("rank*.exit"))
    write_control(job_dir, Control(2, Action.RUN))
    executor.launch("bench", job_dir, 2, command, [Device("local", 0), Device("local", 1)], {})
    started = wait_until(lambda: seen(lambda r: r.get("event") == "started" and r.get("g") == 2))
    write_control(job_dir, Control(2, Action.STOP))
    wait_until(lambda: executor.status(job_dir, 2, 2).finished)
    return {
        "to_boundary": stopped["t_stop_seen"] - requested,
        "checkpoint_write": stopped["t"] - stopped["t_stop_seen"],
        "process_exit": exited - stopped["t"],
        "start_and_import": started["t_session"] - started["t_launch"],
        "rendezvous": started["t_rendezvous"] - started["t_session"],
        "restore": started["t_restored"] - started["t_rendezvous"],
        "total": started["t_restored"] - requested,
        "restored_step": started["restored_step"],
    }


def summarize(runs: list[dict[str, float]]) -> dict[str, Any]:
    out: dict[str, Any] = {"runs": len(runs)}
    for phase in PHASES:
        values = sorted(r[phase] for r in runs)
        p95_index = min(len(values) - 1, round(0.95 * (len(values) - 1)))
        out[phase] = {
            "median_s": round(statistics.median(values), 3),
            "p95_s": round(values[p95_index], 3),
        }
    return out


def main() -> None:
    report: dict[str, Any] = {
        **stamp("python bench/resize.py"),
        "what": "checkpoint-stop-restart 1 -> 2 gloo workers on CPU, 16 images per worker",
        "cpus": os.cpu_count(),
        "target_median_total_s": {"resnet110": 3.0},
        "cold": {},
    }
    for warm, where in ((True, report), (False, report["cold"])):
        executor = LocalExecutor(gpus=2, warm=warm)
        for depth in (20, 110):
            runs = [one_run(depth, executor) for _ in range(RUNS)]
            where[f"resnet{depth}"] = summarize(runs)
            label = "warm" if warm else "cold"
            print(f"{label} resnet{depth}: {json.dumps(where[f'resnet{depth}'])}", file=sys.stderr)
        executor.warm.close()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
