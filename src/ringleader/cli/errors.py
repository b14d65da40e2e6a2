"""How the CLI fails: one clear line on stderr and exit status 2, never a traceback."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import typer
from rich.console import Console

USAGE_ERROR = 2
_stderr = Console(stderr=True, highlight=False, soft_wrap=True)


def fail(message: str) -> NoReturn:
    _stderr.print(f"[bold red]error:[/] {message}", markup=True)
    raise typer.Exit(USAGE_ERROR)


def check_output_file(option: str, path: Path, *, needs_suffix: bool = False) -> None:
    """Fail now, not after a long run, if ``path`` cannot be written as a file."""
    if path.is_dir():
        fail(f"{option} {path}: is a directory; give a file path")
    if needs_suffix and not path.suffix:
        fail(f"{option} {path}: give the file an extension (.png, .svg or .pdf)")
    check_output_dir(option, path.parent)


def check_output_dir(option: str, path: Path) -> None:
    """Create ``path`` if need be; fail with one line if it cannot hold our output."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        fail(f"{option} {path}: cannot be a directory ({err.strerror})")
    if not os.access(path, os.W_OK):
        fail(f"{option} {path}: cannot write there")
