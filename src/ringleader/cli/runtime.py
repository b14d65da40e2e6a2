"""Runtime commands: run the server, and submit, list, inspect and cancel jobs."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console
from rich.table import Table

from ringleader.cli.client import request
from ringleader.cli.errors import fail
from ringleader.policy.catalog import POLICY_NAMES

console = Console(highlight=False)


def server(
    executor: Annotated[
        str,
        typer.Option(help="Where workers run: local (this machine) or ray (a Ray cluster)."),
    ] = "local",
    address: Annotated[
        str,
        typer.Option(help="Ray cluster address for --executor ray (host:port, or auto)."),
    ] = "auto",
    gpus: Annotated[
        int | None,
        typer.Option(min=1, help="Devices: real GPUs if any, else this many virtual CPU devices."),
    ] = None,
    state_dir: Annotated[
        Path | None, typer.Option(help="Database, job logs and checkpoints (default: user data).")
    ] = None,
    host: Annotated[str, typer.Option(help="Address to serve the API on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535)] = 8765,
    policy: Annotated[str, typer.Option(help=f"One of: {', '.join(POLICY_NAMES)}.")] = "elastic",
    config: Annotated[
        Path | None,
        typer.Option(
            help="YAML with policy, probe_window_s, round_s, quantum_s (overrides the flags)."
        ),
    ] = None,
    round_s: Annotated[
        float, typer.Option(min=0.1, help="Re-plan at least this often (seconds).")
    ] = 30.0,
    quantum_s: Annotated[
        float | None,
        typer.Option(min=0.5, help="Time-slicing quantum for the gandiva policy (default 60)."),
    ] = None,
    warm_start: Annotated[
        bool,
        typer.Option(
            help="Local executor: fork Python workers from a process with torch already "
            "imported, so launches and resizes skip ~2 s of start-up.",
        ),
    ] = True,
) -> None:
    """Run the scheduler: REST API (OpenAPI at /docs) plus the control loop.

    Workers run in their own sessions: stopping or crashing the server leaves
    them running, and the next server on the same --state-dir adopts them.
    """
    from ringleader.runtime.server import ServerConfig, default_state_dir, serve

    if executor not in ("local", "ray"):
        fail(f"--executor: {executor!r} is not one of: local, ray")
    if executor == "ray":
        from ringleader.runtime.executor.ray import env_has_ray

        if not env_has_ray():
            fail("--executor ray needs Ray: pip install 'ringleader[ray]'")
    settings: dict[str, Any] = {"policy": policy, "round_s": round_s, "quantum_s": quantum_s}
    keys = {"policy", "probe_window_s", "round_s", "quantum_s"}
    if config is not None:
        try:
            loaded = yaml.safe_load(config.read_text())
        except (OSError, yaml.YAMLError) as err:
            fail(f"--config {config}: {err}")
        if not isinstance(loaded, dict) or set(loaded) - keys:
            fail(f"--config {config}: expected a mapping of {', '.join(sorted(keys))}")
        settings.update(loaded)
    if settings["policy"] not in POLICY_NAMES:
        fail(f"policy: unknown {settings['policy']!r}; choose one of {', '.join(POLICY_NAMES)}")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    cfg = ServerConfig(
        state_dir=state_dir or default_state_dir(),
        host=host,
        port=port,
        gpus=gpus,
        policy=str(settings["policy"]),
        probe_window_s=settings.get("probe_window_s"),
        round_s=float(settings["round_s"]),
        quantum_s=settings.get("quantum_s"),
        executor=executor,
        address=address,
        warm_start=warm_start,
    )
    asyncio.run(serve(cfg))


def load_spec_file(path: Path) -> dict[str, Any]:
    from ringleader.runtime.spec import SpecError, parse_spec

    try:
        if path.stat().st_size > 1 << 20:
            fail(f"{path}: larger than 1 MiB; a job spec is a few lines of YAML")
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        fail(f"{path}: cannot read: {err}")
    except yaml.YAMLError as err:
        fail(f"{path}: not valid YAML: {err}")
    try:
        spec = parse_spec(data)
    except SpecError as err:
        lines = "\n".join(f"  {f}: {r}" for f, r in err.problems)
        fail(f"{path}: invalid job spec\n{lines}")
    dumped: dict[str, Any] = spec.model_dump(mode="json", exclude_defaults=True)
    dumped["command"] = spec.command
    return dumped


def submit(spec: Annotated[Path, typer.Argument(help="Job spec YAML; see examples/.")]) -> None:
    """Submit a job; prints its id."""
    payload = load_spec_file(spec)
    job = request("POST", "/jobs", json=payload).json()
    typer.echo(job["id"])


def _when(t: float | None) -> str:
    return "-" if t is None else datetime.fromtimestamp(t).strftime("%H:%M:%S")


def jobs(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable.")] = False,
) -> None:
    """List jobs."""
    rows = request("GET", "/jobs").json()
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table()
    for col in ("id", "state", "gpus", "step", "epoch", "loss", "submitted", "finished"):
        table.add_column(col)
    for r in rows:
        loss = "-" if r["loss"] is None else f"{r['loss']:.3f}"
        table.add_row(
            r["id"],
            r["state"],
            str(r["gpus"]),
            str(r["step"]),
            f"{r['epoch']:.2f}/{r['epochs']:g}",
            loss,
            _when(r["submitted_at"]),
            _when(r["finished_at"]),
        )
    console.print(table)


def show(
    job_id: str, as_json: Annotated[bool, typer.Option("--json", help="Machine-readable.")] = False
) -> None:
    """Show one job, with its history of launches, stops and resizes."""
    job = request("GET", f"/jobs/{job_id}").json()
    if as_json:
        typer.echo(json.dumps(job, indent=2))
        return
    for key in ("id", "name", "user", "state", "gpus", "devices", "step", "epoch", "loss"):
        console.print(f"[bold]{key}[/]: {job[key]}")
    console.print(f"[bold]attempts[/]: {job['attempts']}  [bold]resizes[/]: {job['resizes']}")
    if job["error"]:
        console.print(f"[bold red]error[/]:\n{job['error']}")
    console.print("[bold]events[/]:")
    for e in job["events"]:
        extra = {k: v for k, v in e.items() if k not in ("t", "kind")}
        console.print(f"  {_when(e['t'])} {e['kind']} {extra if extra else ''}")


def logs(
    job_id: str,
    follow: Annotated[
        bool, typer.Option("-f", "--follow", help="Keep printing new output.")
    ] = False,
    rank: Annotated[int, typer.Option(min=0, help="Which worker's log.")] = 0,
) -> None:
    """Print a job's worker log (rank 0 by default)."""
    offset = 0
    while True:
        response = request("GET", f"/jobs/{job_id}/logs", params={"rank": rank, "offset": offset})
        if response.text:
            typer.echo(response.text, nl=False)
        offset = int(response.headers.get("X-Log-Offset", offset))
        if not follow:
            return
        if request("GET", f"/jobs/{job_id}").json()["state"] in (
            "succeeded",
            "failed",
            "cancelled",
        ):
            tail = request("GET", f"/jobs/{job_id}/logs", params={"rank": rank, "offset": offset})
            typer.echo(tail.text, nl=False)
            return
        time.sleep(0.5)


def cancel(job_id: str) -> None:
    """Cancel a job: it checkpoints and stops at its next minibatch boundary."""
    job = request("DELETE", f"/jobs/{job_id}").json()
    typer.echo(f"{job['id']}: cancel requested (was {job['state']})")
