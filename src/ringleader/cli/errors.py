"""How the CLI fails: one clear line on stderr and exit status 2, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import NoReturn

import typer
from rich.text import Text

from ringleader.cli.terminal import console, shown

USAGE_ERROR = 2
_stderr = console(stderr=True)


def fail(message: str) -> NoReturn:
    """Print ``message`` (shown literally: it may quote user input) and exit 2."""
    say_error(message)
    raise typer.Exit(USAGE_ERROR)


def say_error(message: str) -> None:
    """One ``error:`` line on stderr; the message may hold anything, it is shown literally."""
    _stderr.print(Text.assemble(("error:", "bold red"), " ", shown(message, multiline=True)))


def check_output_file(option: str, path: Path, *, needs_suffix: bool = False) -> None:
    """Fail now, not after a long run, if ``path`` cannot be written as a file."""
    if path.is_dir():
        fail(f"{option} {path}: is a directory; give a file path")
    if needs_suffix and not path.suffix:
        fail(f"{option} {path}: give the file an extension (.png, .svg or .pdf)")
    check_output_dir(option, path.parent)


def check_output_dir(option: str, path: Path) -> None:
    """Create ``path`` if need be; fail with one line if it cannot hold our output."""
    from ringleader.inputs import output_dir_problem  # yaml and pydantic: not for every command

    if (why := output_dir_problem(path)) is not None:
        fail(f"{option} {path}: {why}")


def write_json(option: str, path: Path, payload: object) -> None:
    """Write ``payload`` as indented JSON, or fail naming ``option``."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(payload, indent=2) + "\n")
    except OSError as err:
        fail(f"{option} {path}: cannot write: {err}")
