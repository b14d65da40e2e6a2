"""Client commands: submit, list, inspect, follow and cancel jobs (the server is in cli/server.py).

They import only what a request needs (httpx, rich): a user runs them all day.
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Group
from rich.table import Table
from rich.text import Text

from ringleader.cli.client import api, failed, job_path, request, request_json
from ringleader.cli.errors import fail
from ringleader.cli.events import devices_text, event_text, value_text, why_words
from ringleader.cli.terminal import compact_table, shown, whole_widths
from ringleader.cli.terminal import console as make_console
from ringleader.client import ApiError, Unreachable

console = make_console()


def load_spec_file(path: Path) -> dict[str, Any]:
    import yaml

    from ringleader.inputs import load_yaml, read_capped

    try:
        data = load_yaml(read_capped(path, 1 << 20, "job spec", ValueError))
    except ValueError as err:
        fail(str(err))
    except yaml.YAMLError as err:
        fail(f"{path}: not valid YAML: {err}")
    return checked_spec(data, str(path))


def checked_spec(data: Any, where: str) -> dict[str, Any]:
    """``data`` as a spec to submit, its ``workdir`` made absolute.

    As with ``srun``, a job runs where it is submitted from unless its spec
    says otherwise, and a relative ``workdir`` is taken from here too. The
    fields are checked by the server (``post_spec`` says what it refused):
    checking here as well would cost every submit the import of pydantic.
    """
    if not isinstance(data, dict):
        fail(f"{where}: invalid job spec\n  (spec): expected a mapping of fields")
    spec: dict[str, Any] = dict(data)
    workdir = spec.get("workdir", ".")
    if isinstance(workdir, str) and "\x00" not in workdir:
        spec["workdir"] = str((Path.cwd() / workdir).absolute())
    return spec


def post_spec(spec: dict[str, Any], where: str) -> dict[str, Any]:
    """Submit ``spec``; a refusal is printed field by field, naming ``where`` it came from."""
    try:
        job: dict[str, Any] = api().request_json("POST", "/jobs", json=spec)
    except ApiError as err:
        if err.status == 422 and err.problems:
            lines = "\n".join(f"  {f}: {r}" for f, r in err.problems)
            fail(f"{where}: invalid job spec\n{lines}")
        failed(err)
    except Unreachable as err:
        failed(err)
    return job


def submit(
    spec: Annotated[Path, typer.Argument(help="Job spec YAML; see examples/.")],
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable.")] = False,
) -> None:
    """Submit a job; prints its id (with --json, the job as stored)."""
    job = post_spec(load_spec_file(spec), str(spec))
    typer.echo(json.dumps(job, indent=2) if as_json else shown(job["id"]))


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
    watch: Annotated[
        float | None,
        typer.Option(
            min=0.5, max=3600, help="Redraw every SECONDS until Ctrl-C, as `watch` would."
        ),
    ] = None,
) -> None:
    """List jobs, newest last, with why each waits (a damaged row is listed as ``damaged``)."""
    params: dict[str, Any] = {"order": "desc"}
    if state:
        params["state"] = state
    if user:
        params["user"] = user
    if watch is not None and not as_json:
        _watch(params, None if every else limit, watch)
        return
    rows, more = _pages(params, None if every else limit)
    rows.reverse()
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    console.print(_table(rows))
    if more:
        console.print(Text(f"the newest {len(rows)} shown; older ones: --limit N or --all", "dim"))
    if (note := _cluster_note()) is not None:
        console.print(note)


def _cluster_note() -> Text | None:
    """A warning when the executor does not answer (``GET /cluster``): the table is
    then what was last heard, and nothing moves until it answers."""
    try:
        cluster = api().request("GET", "/cluster").json()
    except (Unreachable, ApiError, ValueError):
        return None
    if not isinstance(cluster, dict) or cluster.get("available", True):
        return None
    since = cluster.get("unavailable_since")
    when = f" since {_when(since)}" if isinstance(since, int | float) else ""
    return Text(
        f"the cluster does not answer{when} ({shown(cluster.get('reason'))}): "
        "every job is held as it was last seen until it does",
        "bold yellow",
    )


def _watch(params: dict[str, Any], limit: int | None, every_s: float) -> None:
    """Redraw the table in place on a terminal; into a pipe or a file, one after another."""
    from rich.live import Live

    with Live(console=console, auto_refresh=False) if console.is_terminal else _Frames() as live:
        while True:
            rows, _ = _pages(params, limit)
            rows.reverse()
            stamp = Text(f"every {every_s:g} s, {datetime.now():%H:%M:%S}; Ctrl-C stops", "dim")
            live.update(Group(_table(rows), stamp), refresh=True)
            time.sleep(every_s)


class _Frames:
    """``Live``'s interface for output that is not a terminal: each frame printed whole."""

    def __enter__(self) -> _Frames:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, renderable: Group, refresh: bool = True) -> None:
        console.print(renderable)


def _table(rows: list[dict[str, Any]], width: int | None = None) -> Table:
    cells = [
        (
            shown(r.get("id")),
            shown(r.get("user")),
            shown(r.get("state")),
            _number(r.get("gpus"), "d"),
            _number(r.get("step"), "d"),
            f"{_number(r.get('epoch'), '.2f')}/{_number(r.get('epochs'), 'g')}",
            _number(r.get("loss"), ".3f"),
            _when(r.get("submitted_at")),
            _when(r.get("finished_at")),
            why_words(r.get("reason_code")) or shown(r.get("reason") or ""),
        )
        for r in rows
    ]
    # What a user reads or copies is never cut. On a narrow terminal the times go
    # (finished first), and the why wraps in what is left; columns one space apart.
    heads = ["id", "user", "state", "gpus", "step", "epoch", "loss", "submitted", "finished"]
    widths = whole_widths(heads, cells)
    room = (width or console.width) - max([3, *(len(c[-1]) for c in cells)])
    while sum(widths) + 2 * len(widths) > room and heads[-1] in ("finished", "submitted"):
        heads.pop()
        widths.pop()
    table = compact_table()
    for name, wide in zip(heads, widths, strict=True):
        table.add_column(name, no_wrap=True, min_width=wide)
    table.add_column("why", ratio=1)
    kept = len(heads)
    for c in cells:
        table.add_row(*c[:kept], c[-1])
    return table


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
    return Text.assemble((key, "bold"), ": ", value_text(value))


def _speeds(speeds: dict[str, Any]) -> str:
    """``v100 3.36 (estimated), k80 1.00``: relative to the job's fastest measured type."""
    parts = []
    for name, s in speeds.items():
        if not isinstance(s, dict) or not isinstance(s.get("relative_speed"), int | float):
            continue
        guess = " (estimated)" if s.get("estimated") else ""
        parts.append(f"{name} {s['relative_speed']:.2f}{guess}")
    return ", ".join(parts)


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
    for key in ("id", "name", "user", "state", "gpus"):
        console.print(_line(key, job.get(key)))
    console.print(_line("devices", devices_text(job.get("devices") or [], job.get("gpu_types"))))
    for key in ("step", "epoch", "loss"):
        console.print(_line(key, job.get(key)))
    console.print(_line("attempts", job.get("attempts")), "", _line("resizes", job.get("resizes")))
    if job.get("batch") is not None:
        bounds = (job.get("spec") or {}).get("batch") or {}
        said = (
            f"{job['batch']} (adapts within {bounds.get('global_min')}..{bounds.get('global_max')}"
        )
        if job.get("noise_scale") is not None:
            said += f"; gradient noise scale {job['noise_scale']:,.0f} examples"
        console.print(_line("batch", said + ")"))
    if job.get("reason"):
        console.print(_line("why", job["reason"]))
    speeds = job.get("type_speeds")
    if isinstance(speeds, dict) and speeds:
        console.print(_line("speed per GPU type", _speeds(speeds)))
    if job.get("bad_progress_lines"):
        console.print(
            _line("bad progress lines", job["bad_progress_lines"]),
            Text("(lines the job wrote that were skipped as malformed)", "dim"),
        )
    if job.get("error"):
        console.print(Text("error:", "bold red"))
        console.print(Text(shown(job["error"], multiline=True)))
    for e in job.get("events") or []:
        if isinstance(e, dict) and e.get("warning"):
            console.print(Text("warning", "bold yellow"), Text(": " + shown(e["warning"])), sep="")
    console.print(Text("events", "bold"), ":", sep="")
    for e in job.get("events") or []:
        if isinstance(e, dict):
            console.print(f"  {_when(e.get('t'))} {shown(e.get('kind'))} {event_text(e)}")


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
    tail: Annotated[
        int | None,
        typer.Option("--tail", "-n", min=1, max=100_000, help="Only the last N lines."),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option("--json", help='Machine-readable: one {"text": ...} line per piece read.'),
    ] = False,
) -> None:
    """Print a job's worker log (rank 0 by default); JOB_ID may be any unique prefix."""
    follow_log(job_id, rank=rank, raw=raw, follow=follow, tail=tail, as_json=as_json)


READ_BYTES = 1 << 20
"""The most one log request returns."""


def follow_log(
    job_id: str,
    *,
    rank: int = 0,
    raw: bool = False,
    follow: bool = True,
    tail: int | None = None,
    as_json: bool = False,
) -> str:
    """Print the log from the start (or its last ``tail`` lines), and with ``follow``
    as the server pushes it until the job ends; returns the job's last state."""

    def emit(text: str) -> None:
        if as_json:
            if text:
                typer.echo(json.dumps({"text": text}))
            return
        typer.echo(text if raw else shown(text, multiline=True), nl=False)

    path = job_path(job_id)  # checked here, so a bad id is the CLI's usual error
    if follow:
        try:
            for text in api().follow_logs(job_id, rank=rank, tail=tail):
                emit(text)
        except (ApiError, Unreachable) as err:
            failed(err)
        return str(request_json("GET", path)["state"])
    offset = 0
    while True:
        params: dict[str, int] = {"rank": rank, "offset": offset}
        if tail is not None:
            params = {"rank": rank, "tail": tail}
        response = request("GET", job_path(job_id, "/logs"), params=params)
        emit(response.text)
        end = int(response.headers.get("X-Log-Offset", offset))
        # A log is printed whole, as `cat` would, a MiB a request, up to where it was.
        if tail is not None or end - offset < READ_BYTES:
            return str(request_json("GET", path)["state"])
        offset = end


def cancel(
    job_id: str,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable.")] = False,
) -> None:
    """Cancel a job: SIGTERM to its ranks, SIGKILL after its stop_grace_s (default 30 s).

    A job that uses the job library instead checkpoints and stops at its next
    minibatch boundary.
    """
    job = request_json("DELETE", job_path(job_id))
    if as_json:
        typer.echo(json.dumps(job, indent=2))
        return
    name, state = shown(job["id"]), shown(job["state"])
    if job["state"] in ("succeeded", "failed", "cancelled"):
        typer.echo(f"{name}: already {state}; nothing to cancel")
    else:
        typer.echo(f"{name}: cancel requested (was {state})")
