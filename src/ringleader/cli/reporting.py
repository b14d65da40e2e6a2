"""What every long simulation command shows: a progress bar, and plots written safely."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ringleader.cli import terminal
from ringleader.cli.errors import fail

console = terminal.console()


def progress_bar() -> Progress:
    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    )


def write_plot(path: Path, draw: Callable[[], object]) -> None:
    try:
        draw()
    except (OSError, ValueError) as err:
        fail(f"--plot {path}: cannot write the plot: {err}")
    console.print(f"wrote {path}")
