"""``ringleader run``: submit a command as it is, the way ``srun`` does."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Annotated, Any

import typer

from ringleader.cli.client import job_path, request
from ringleader.cli.errors import fail
from ringleader.cli.runtime import checked_spec, follow_log, post_spec
from ringleader.cli.terminal import console, shown

_stderr = console(stderr=True)


def run(
    command: Annotated[list[str], typer.Argument(help="The command and its arguments, after --.")],
    gpus: Annotated[int, typer.Option(min=1, max=4096, help="Workers (one per GPU).")] = 1,
    elastic: Annotated[
        str | None,
        typer.Option(
            metavar="MIN:MAX",
            help="Let the policy choose the worker count in MIN..MAX. --gpus is then the "
            "size asked for (what a fixed-size policy gives); an elastic policy may start "
            "the job anywhere in the range, and resize it.",
        ),
    ] = None,
    name: Annotated[str | None, typer.Option(help="Job name (default: from the command).")] = None,
    workdir: Annotated[
        Path | None,
        typer.Option(help="Where the command runs (default: here); relative paths resolve there."),
    ] = None,
    epochs: Annotated[
        float, typer.Option(min=1e-9, max=1e7, help="Training the job does, for the policy.")
    ] = 1.0,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait", help="Follow rank 0's output to the end; exit 0 only if the job succeeded."
        ),
    ] = False,
    env: Annotated[
        list[str] | None,
        typer.Option(
            "--env",
            "-e",
            metavar="KEY=VALUE",
            help="Set a variable for every worker (repeat for more); KEY alone passes this "
            "shell's value. Variables set before `ringleader run` do not reach the job.",
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the job as stored, not its id.")
    ] = False,
) -> None:
    """Run a command on the cluster as it is: ringleader run --gpus 2 -- python train.py.

    Prints the job id. Each worker gets torchrun's environment (RANK,
    LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, ...), so a torchrun script runs
    unchanged. With --wait, Ctrl-C cancels the job, as srun does.
    """
    spec: dict[str, Any] = {
        "name": name or _name_from(command),
        "command": command,
        "gpus": gpus,
        "epochs": epochs,
    }
    if workdir is not None:
        spec["workdir"] = str(workdir)
    if env:
        spec["env"] = _variables(env)
    if elastic is not None:
        low, high = _range(elastic)
        spec |= {"elastic": True, "min_gpus": low, "max_gpus": high}
        spec["gpus"] = gpus if low <= gpus <= high else low
    job = post_spec(checked_spec(spec, "ringleader run"), "ringleader run")
    typer.echo(json.dumps(job, indent=2) if as_json else shown(job["id"]))
    if not wait:
        return
    try:
        state = follow_log(str(job["id"]))
    except KeyboardInterrupt:
        request("DELETE", job_path(str(job["id"])))
        _stderr.print(f"ringleader: Ctrl-C: cancelled {shown(job['id'])}; its workers are stopped")
        raise typer.Exit(130) from None
    _stderr.print(f"ringleader: {shown(job['id'])} {shown(state)}")
    raise typer.Exit(0 if state == "succeeded" else 1)


def _variables(given: list[str]) -> dict[str, str]:
    """``--env`` values as the spec's ``env``: ``KEY=VALUE``, or ``KEY`` for this shell's."""
    out: dict[str, str] = {}
    for item in given:
        key, has_value, value = item.partition("=")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            fail(f"--env {item[:80]!r}: give KEY=VALUE, KEY a variable name (letters, digits, _)")
        if not has_value:
            if key not in os.environ:
                fail(f"--env {key}: not set in this shell; give {key}=VALUE")
            value = os.environ[key]
        out[key] = value
    return out


def _range(text: str) -> tuple[int, int]:
    match = re.fullmatch(r"(\d{1,4}):(\d{1,4})", text.strip())
    if match is None:
        fail(f"--elastic {text!r}: give MIN:MAX worker counts, e.g. 1:8")
    low, high = int(match[1]), int(match[2])
    if not 1 <= low <= high:
        fail(f"--elastic {text}: need 1 <= MIN <= MAX")
    return low, high


def _name_from(command: list[str]) -> str:
    """A job name from the program and script, e.g. ``python train.py`` → ``train``."""
    words = [Path(w).stem for w in command[:2] if not w.startswith("-")]
    if len(words) > 1 and words[0].startswith("python"):
        words = words[1:]
    name = re.sub(r"[^A-Za-z0-9_.\-]+", "-", words[0] if words else "job").strip("-.")
    return name[:40] or "job"
