"""How the CLI fails: one clear line on stderr and exit status 2, never a traceback."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console

USAGE_ERROR = 2
_stderr = Console(stderr=True, highlight=False, soft_wrap=True)


def fail(message: str) -> NoReturn:
    _stderr.print(f"[bold red]error:[/] {message}", markup=True)
    raise typer.Exit(USAGE_ERROR)
