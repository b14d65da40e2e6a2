"""``ringleader demo``: the scheduler on this machine running real training jobs.

Starts a server on a free port with 4 devices (virtual CPU devices here),
submits a mixed workload of real PyTorch jobs at staggered times, shows live
progress, then prints each job's completion and queueing times and the
summary from ``ringleader.metrics``, writes its training curves and GPUs per job
over time (``report.timeline``), and stops the server.
"""

from __future__ import annotations

import itertools
import json
import math
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
from rich.live import Live
from rich.table import Table

from ringleader.cli import terminal
from ringleader.cli.errors import check_output_dir, fail
from ringleader.metrics import JobRecord, summarize
from ringleader.runtime.local_server import LocalServerError, local_server
from ringleader.runtime.state.history import usage_from_events

console = terminal.console()

RESNET = (
    "python -m ringleader.workloads.resnet --depth {depth} --epochs {epochs} "
    "--examples-per-epoch 1024 --batch 32 --checkpoint-every-s 5"
)
LM = (
    "python -m ringleader.workloads.transformer --epochs {epochs} --examples-per-epoch 2048 "
    "--batch 16 --length 32 --width 64 --checkpoint-every-s 5"
)

# (seconds after start, spec): elastic and fixed-size jobs of two model families.
WORKLOAD: list[tuple[float, dict[str, Any]]] = [
    (
        0,
        {
            "name": "resnet20-a",
            "command": RESNET.format(depth=20, epochs=6),
            "elastic": True,
            "max_gpus": 4,
            "epochs": 6,
            "user": "alice",
        },
    ),
    (
        8,
        {
            "name": "lm-b",
            "command": LM.format(epochs=3),
            "elastic": True,
            "max_gpus": 2,
            "epochs": 3,
            "user": "bob",
        },
    ),
    (
        14,
        {
            "name": "resnet8-c",
            "command": RESNET.format(depth=8, epochs=4),
            "gpus": 1,
            "epochs": 4,
            "user": "carol",
        },
    ),
    (
        20,
        {
            "name": "resnet20-d",
            "command": RESNET.format(depth=20, epochs=3),
            "elastic": True,
            "max_gpus": 2,
            "epochs": 3,
            "user": "alice",
        },
    ),
    (26, {"name": "lm-e", "command": LM.format(epochs=2), "gpus": 2, "epochs": 2, "user": "dave"}),
    (
        32,
        {
            "name": "resnet14-f",
            "command": RESNET.format(depth=14, epochs=3),
            "elastic": True,
            "max_gpus": 4,
            "epochs": 3,
            "user": "bob",
        },
    ),
]


def _table(jobs: list[dict[str, Any]], elapsed: float) -> Table:
    table = Table(title=f"ringleader demo — {elapsed:.0f} s")
    for col in ("job", "state", "gpus", "epoch", "step", "loss", "resizes"):
        table.add_column(col)
    for j in jobs:
        loss = "-" if j["loss"] is None else f"{j['loss']:.3f}"
        table.add_row(
            j["name"],
            j["state"],
            str(j["gpus"]),
            f"{j['epoch']:.2f}/{j['epochs']:g}",
            str(j["step"]),
            loss,
            str(j["resizes"]),
        )
    return table


def demo(
    out: Annotated[Path, typer.Option(help="Where to write results and the plot.")] = Path(
        "demo-output"
    ),
    gpus: Annotated[int, typer.Option(min=1, max=64, help="Devices for the demo server.")] = 4,
    timeout: Annotated[float, typer.Option(help="Give up after this many seconds.")] = 900,
) -> None:
    """Run the scheduler on this machine with real training jobs, end to end."""
    if not (math.isfinite(timeout) and timeout > 0):
        fail(f"--timeout: {timeout} must be a positive number of seconds")
    check_output_dir("--out", out)
    state = Path(tempfile.mkdtemp(prefix="ringleader-demo-"))
    try:
        with (
            local_server(gpus=gpus, state_dir=state, log=out / "server.log", round_s=10) as served,
            served.client() as api,
        ):
            console.print(
                f"server at {served.url}, {gpus} devices, state in {state}; log in {out}/server.log"
            )
            jobs = _run(api, timeout)
            _report(api, jobs, out, gpus, state)
    except LocalServerError as err:
        fail(str(err))


def _run(api: httpx.Client, timeout: float) -> list[dict[str, Any]]:
    """Submit the workload, each job with its own user's token, and follow it as admin."""
    start = time.monotonic()
    pending = list(WORKLOAD)
    jobs: list[dict[str, Any]] = []
    tokens: dict[str, str] = {}
    with Live(_table(jobs, 0), console=console, refresh_per_second=2) as live:
        while True:
            elapsed = time.monotonic() - start
            while pending and pending[0][0] <= elapsed:
                _, spec = pending.pop(0)
                user = spec["user"]
                if user not in tokens:
                    made = api.post("/users", json={"name": user})
                    tokens[user] = made.raise_for_status().json()["token"]
                mine = {"Authorization": f"Bearer {tokens[user]}"}
                api.post("/jobs", json=spec, headers=mine).raise_for_status()
            jobs = api.get("/jobs").json()
            live.update(_table(jobs, elapsed))
            done = all(j["state"] in ("succeeded", "failed", "cancelled") for j in jobs)
            if not pending and done:
                return jobs
            if elapsed > timeout:
                fail(f"the demo did not finish within {timeout:.0f} s")
            time.sleep(1)


def _report(
    api: httpx.Client, jobs: list[dict[str, Any]], out: Path, gpus: int, state: Path
) -> None:
    records = [
        JobRecord(j["id"], j["submitted_at"], j["started_at"], j["finished_at"], j["resizes"])
        for j in jobs
    ]
    console.print()  # the live table's last frame may end mid-line where stdout is a file
    table = Table(title="jobs")
    for col in ("job", "state", "JCT (s)", "queueing (s)", "resizes", "final loss"):
        table.add_column(col)
    for j, r in zip(jobs, records, strict=True):
        table.add_row(
            j["name"],
            j["state"],
            f"{r.jct or 0:.1f}",
            f"{r.queueing or 0:.1f}",
            str(j["resizes"]),
            "-" if j["loss"] is None else f"{j['loss']:.3f}",
        )
    console.print(table)
    events = {j["id"]: api.get(f"/jobs/{j['id']}").json()["events"] for j in jobs}
    usage = usage_from_events(events)
    summary = summarize(records, usage, gpus)
    console.print(
        f"average JCT {summary.avg_jct_s:.1f} s, p95 {summary.p95_jct_s:.1f} s, "
        f"average queueing {summary.avg_queueing_s:.1f} s, makespan {summary.makespan_s:.1f} s, "
        f"device utilisation {summary.utilization:.0%}"
    )
    progress = {j["id"]: _progress(state / "jobs" / j["id"] / "progress.jsonl") for j in jobs}
    resized = [j for j in jobs if j["resizes"] > 0 and len(_sizes(progress[j["id"]])) > 1]
    early = [j["name"] for j in jobs if j["resizes"] > 0 and j not in resized]
    console.print(f"resized while running: {', '.join(j['name'] for j in resized) or 'none'}")
    for j in resized:
        console.print(f"  {j['name']}: {continuity(progress[j['id']])}")
    if early:
        console.print(f"resized before a step at their first size: {', '.join(early)}")
    (out / "runtime.json").write_text(
        json.dumps(
            {"jobs": jobs, "summary": summary.as_dict(), "events": events}, indent=2, default=str
        )
        + "\n"
    )
    from ringleader.report.plots import training_curves
    from ringleader.report.timeline import gpu_timeline

    training_curves(jobs, progress, out / "runtime.png")
    gpu_timeline([j | {"events": events[j["id"]]} for j in jobs], gpus, out / "gpus.png")
    console.print(f"wrote {out}/runtime.json, {out}/runtime.png (loss) and {out}/gpus.png (GPUs)")
    failed = [j["name"] for j in jobs if j["state"] != "succeeded"]
    if failed:
        fail(f"jobs did not succeed: {', '.join(failed)}")


def continuity(progress: list[dict[str, Any]]) -> str:
    """Check a resized job's training went on: steps only forward, lr ∝ world size."""
    steps = [r for r in progress if "loss" in r]
    forward = all(b["step"] == a["step"] + 1 for a, b in itertools.pairwise(steps))
    per_worker = {round(r["lr"] / r["world_size"], 12) for r in steps}
    sizes = _sizes(progress)
    restored = [r["restored_step"] for r in progress if r.get("event") == "started"][1:]
    return (
        f"world sizes {sizes}; global step "
        f"{'never went back' if forward else 'WENT BACK'}; learning rate "
        f"{'followed the world size' if len(per_worker) == 1 else 'did NOT follow the world size'}"
        f"; restored at steps {restored}"
    )


def _sizes(progress: list[dict[str, Any]]) -> list[int]:
    """The world sizes a job trained steps at."""
    return sorted({r["world_size"] for r in progress if "loss" in r})


def _progress(path: Path) -> list[dict[str, Any]]:
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (OSError, ValueError):
        return []
