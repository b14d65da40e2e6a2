"""Runtime commands: run the server, and submit, list, inspect and cancel jobs."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, ClassVar

import typer
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from rich.table import Table
from rich.text import Text

from ringleader.cli.client import job_path, request, request_json
from ringleader.cli.errors import fail
from ringleader.cli.terminal import console as make_console
from ringleader.cli.terminal import shown
from ringleader.inputs import field_path, load_yaml, read_capped
from ringleader.policy.catalog import POLICY_NAMES

console = make_console()


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
        typer.Option(
            min=1, max=4096, help="Devices: real GPUs if any, else this many virtual CPU devices."
        ),
    ] = None,
    state_dir: Annotated[
        Path | None, typer.Option(help="Database, job logs and checkpoints (default: user data).")
    ] = None,
    host: Annotated[str, typer.Option(help="Address to serve the API on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535)] = 8765,
    policy: Annotated[
        str,
        typer.Option(
            help="Any policy `ringleader policies` marks as served (not the oracles). "
            "Those that expect speed models on arrival get a short measured profiling phase."
        ),
    ] = "elastic",
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
    max_log_mib: Annotated[
        int,
        typer.Option(
            min=0,
            max=1 << 20,
            help="Rotate a rank's log to rank<N>.log.1 past this many MiB (0: never).",
        ),
    ] = 64,
    max_progress_mib: Annotated[
        int,
        typer.Option(
            min=0,
            max=1 << 20,
            help="Rotate a job's progress.jsonl to .1 past this many MiB (0: never).",
        ),
    ] = 16,
) -> None:
    """Run the scheduler: REST API (OpenAPI at /docs) plus the control loop.

    Workers run in their own sessions: stopping or crashing the server leaves
    them running, and the next server on the same --state-dir adopts them.
    """
    from ringleader.runtime.executor.ray import RayUnavailable
    from ringleader.runtime.server import ServerConfig, default_state_dir, serve
    from ringleader.runtime.store import StoreError

    if executor not in ("local", "ray"):
        fail(f"--executor: {executor!r} is not one of: local, ray")
    if executor == "ray":
        from ringleader.runtime.executor.ray import env_has_ray

        if not env_has_ray():
            fail("--executor ray needs Ray: pip install 'ringleader[ray]'")
    settings: dict[str, Any] = {"policy": policy, "round_s": round_s, "quantum_s": quantum_s}
    if config is not None:
        try:
            loaded = load_yaml(read_capped(config, 1 << 20, "server config", ValueError))
        except (ValueError, yaml.YAMLError) as err:
            fail(f"--config {config}: {err}")
        if not isinstance(loaded, dict):
            fail(f"--config {config}: expected a mapping of {', '.join(PolicySettings.KEYS)}")
        settings.update(loaded)
    try:
        chosen = PolicySettings.model_validate(settings)
    except ValidationError as err:
        where = f"--config {config}: " if config is not None else ""
        e = err.errors()[0]
        fail(f"{where}{field_path(e['loc'], '(config)')}: {e['msg'].removeprefix('Value error, ')}")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    cfg = ServerConfig(
        state_dir=state_dir or default_state_dir(),
        host=host,
        port=port,
        gpus=gpus,
        policy=chosen.policy,
        probe_window_s=chosen.probe_window_s,
        round_s=chosen.round_s,
        quantum_s=chosen.quantum_s,
        executor=executor,
        address=address,
        warm_start=warm_start,
        log_cap_bytes=max_log_mib << 20,
        progress_cap_bytes=max_progress_mib << 20,
    )
    try:
        asyncio.run(serve(cfg))
    except StoreError as err:
        fail(str(err))
    except RayUnavailable as err:
        fail(f"--executor ray: {err}")


class PolicySettings(BaseModel):
    """What ``--config`` may set; the same bounds as the flags."""

    model_config = ConfigDict(extra="forbid", strict=True)
    KEYS: ClassVar[tuple[str, ...]] = ("policy", "probe_window_s", "round_s", "quantum_s")

    policy: str
    probe_window_s: Annotated[float, Field(ge=0.5, allow_inf_nan=False)] | None = None
    round_s: Annotated[float, Field(ge=0.1, le=86_400, allow_inf_nan=False)] = 30.0
    quantum_s: Annotated[float, Field(ge=0.5, le=86_400, allow_inf_nan=False)] | None = None

    @field_validator("policy")
    @classmethod
    def _known(cls, value: str) -> str:
        from ringleader.policy.catalog import policy_named
        from ringleader.spine.needs import RUNTIME, PolicyNotServed, serve_policy

        if value not in POLICY_NAMES:
            raise ValueError(f"unknown {value!r}; choose one of {', '.join(POLICY_NAMES)}")
        try:
            serve_policy(policy_named(value), RUNTIME)
        except PolicyNotServed as err:
            raise ValueError(str(err)) from None
        return value

    @field_validator("probe_window_s", "round_s", "quantum_s", mode="before")
    @classmethod
    def _number(cls, value: Any) -> Any:
        # Strict mode refuses ints for floats; YAML writes "30" for 30 seconds.
        if isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        return value


def load_spec_file(path: Path) -> dict[str, Any]:
    try:
        data = load_yaml(read_capped(path, 1 << 20, "job spec", ValueError))
    except ValueError as err:
        fail(str(err))
    except yaml.YAMLError as err:
        fail(f"{path}: not valid YAML: {err}")
    return checked_spec(data, str(path))


def checked_spec(data: Any, where: str) -> dict[str, Any]:
    """``data`` as a spec to submit, checked here; ``workdir`` made absolute.

    As with ``srun``, a job runs where it is submitted from unless its spec
    says otherwise, and a relative ``workdir`` is taken from here too.
    """
    from ringleader.runtime.spec import SpecError, parse_spec

    if isinstance(data, dict):
        workdir = data.get("workdir", ".")
        if isinstance(workdir, str) and "\x00" not in workdir:
            data = {**data, "workdir": str((Path.cwd() / workdir).absolute())}
    try:
        spec = parse_spec(data)
    except SpecError as err:
        lines = "\n".join(f"  {f}: {r}" for f, r in err.problems)
        fail(f"{where}: invalid job spec\n{lines}")
    dumped: dict[str, Any] = spec.model_dump(mode="json", exclude_defaults=True)
    dumped["command"] = spec.command
    return dumped


def submit(spec: Annotated[Path, typer.Argument(help="Job spec YAML; see examples/.")]) -> None:
    """Submit a job; prints its id."""
    payload = load_spec_file(spec)
    job = request_json("POST", "/jobs", json=payload)
    typer.echo(shown(job["id"]))


def _when(t: object) -> str:
    if isinstance(t, bool) or not isinstance(t, int | float):
        return "-"
    try:
        return datetime.fromtimestamp(t).strftime("%H:%M:%S")
    except (ValueError, OverflowError, OSError):
        return "?"


def _number(value: object, fmt: str) -> str:
    """A number from the server as ``fmt``, or ``-`` for anything else (null, a damaged row)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "-"
    return format(value, fmt)


def jobs(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable.")] = False,
    state: Annotated[
        str | None,
        typer.Option(help="Only these states, comma-separated (e.g. queued,running)."),
    ] = None,
    user: Annotated[str | None, typer.Option(help="Only this user's jobs.")] = None,
    limit: Annotated[
        int, typer.Option(min=1, max=100_000, help="Show the newest N jobs that match.")
    ] = 50,
    every: Annotated[
        bool, typer.Option("--all", help="Every job that matches, however many (pages through).")
    ] = False,
) -> None:
    """List jobs, newest last (a job whose stored row is damaged is listed as ``damaged``)."""
    params: dict[str, Any] = {"order": "desc"}
    if state:
        params["state"] = state
    if user:
        params["user"] = user
    rows, more = _pages(params, None if every else limit)
    rows.reverse()
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table()
    for col in ("id", "user", "state", "gpus", "step", "epoch", "loss", "submitted", "finished"):
        table.add_column(col)
    for r in rows:
        table.add_row(
            shown(r.get("id")),
            shown(r.get("user")),
            shown(r.get("state")),
            _number(r.get("gpus"), "d"),
            _number(r.get("step"), "d"),
            f"{_number(r.get('epoch'), '.2f')}/{_number(r.get('epochs'), 'g')}",
            _number(r.get("loss"), ".3f"),
            _when(r.get("submitted_at")),
            _when(r.get("finished_at")),
        )
    console.print(table)
    if more:
        console.print(Text(f"the newest {len(rows)} shown; older ones: --limit N or --all", "dim"))


def _pages(params: dict[str, Any], limit: int | None) -> tuple[list[dict[str, Any]], bool]:
    """Job summaries, following the server's cursor; whether more were left unread."""
    rows: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        want = 1000 if limit is None else min(1000, limit - len(rows))
        page = {**params, "limit": want} | ({"cursor": cursor} if cursor else {})
        response = request("GET", "/jobs", params=page)
        try:
            rows.extend(response.json())
        except ValueError:
            fail("the server's job list is not JSON; is RINGLEADER_URL the ringleader server?")
        cursor = response.headers.get("X-Next-Cursor")
        if cursor is None:
            return rows, False
        if limit is not None and len(rows) >= limit:
            return rows, True


def _line(key: str, value: object) -> Text:
    return Text.assemble((key, "bold"), ": ", shown(value))


def show(
    job_id: str, as_json: Annotated[bool, typer.Option("--json", help="Machine-readable.")] = False
) -> None:
    """Show one job, with its history of launches, stops and resizes.

    Everything a user or a job wrote (names, losses, errors, log tails) is
    printed literally, control characters escaped.
    """
    job = request_json("GET", job_path(job_id))
    if as_json:
        typer.echo(json.dumps(job, indent=2))
        return
    for key in ("id", "name", "user", "state", "gpus", "devices", "step", "epoch", "loss"):
        console.print(_line(key, job.get(key)))
    console.print(_line("attempts", job.get("attempts")), "", _line("resizes", job.get("resizes")))
    if job.get("bad_progress_lines"):
        console.print(
            _line("bad progress lines", job["bad_progress_lines"]),
            Text("(lines the job wrote that were skipped as malformed)", "dim"),
        )
    if job.get("error"):
        console.print(Text("error", "bold red"), Text(":\n" + shown(job["error"], multiline=True)))
    console.print(Text("events", "bold"), ":", sep="")
    for e in job.get("events") or []:
        if not isinstance(e, dict):
            continue
        extra = {k: v for k, v in e.items() if k not in ("t", "kind")}
        console.print(
            f"  {_when(e.get('t'))} {shown(e.get('kind'))} {shown(extra) if extra else ''}"
        )


def logs(
    job_id: str,
    follow: Annotated[
        bool, typer.Option("-f", "--follow", help="Keep printing new output.")
    ] = False,
    rank: Annotated[int, typer.Option(min=0, max=65535, help="Which worker's log.")] = 0,
    raw: Annotated[
        bool,
        typer.Option(
            "--raw",
            help="Write the log's bytes as they are (for a file or a pipe). By default "
            "control characters are shown escaped, so a job cannot drive your terminal.",
        ),
    ] = False,
) -> None:
    """Print a job's worker log (rank 0 by default)."""
    follow_log(job_id, rank=rank, raw=raw, follow=follow)


FINISHED = ("succeeded", "failed", "cancelled", "damaged")


def follow_log(job_id: str, *, rank: int = 0, raw: bool = False, follow: bool = True) -> str:
    """Print the log from the start, and with ``follow`` until the job ends; its last state."""

    def emit(text: str) -> None:
        typer.echo(text if raw else shown(text, multiline=True), nl=False)

    offset = 0
    while True:
        response = request(
            "GET", job_path(job_id, "/logs"), params={"rank": rank, "offset": offset}
        )
        if response.text:
            emit(response.text)
        offset = int(response.headers.get("X-Log-Offset", offset))
        state = str(request_json("GET", job_path(job_id))["state"])
        if not follow:
            return state
        if state in FINISHED:
            tail = request(
                "GET", job_path(job_id, "/logs"), params={"rank": rank, "offset": offset}
            )
            emit(tail.text)
            return state
        time.sleep(0.5)


def cancel(job_id: str) -> None:
    """Cancel a job: it checkpoints and stops at its next minibatch boundary."""
    job = request_json("DELETE", job_path(job_id))
    name, state = shown(job["id"]), shown(job["state"])
    if job["state"] in ("succeeded", "failed", "cancelled"):
        typer.echo(f"{name}: already {state}; nothing to cancel")
    else:
        typer.echo(f"{name}: cancel requested (was {state})")
