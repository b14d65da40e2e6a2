"""``--help`` at 80 columns: every option's name whole, no line wider than the terminal."""

from __future__ import annotations

import click
import pytest
import typer.main
from click.testing import CliRunner

from ringleader.cli.app import COMMANDS, build

WIDTH = 80


def _commands() -> list[tuple[str, ...]]:
    """Every command line that has a ``--help``: the root, each command, each subcommand."""
    root = typer.main.get_command(build())
    assert isinstance(root, click.Group)
    lines: list[tuple[str, ...]] = [()]
    for name in COMMANDS:
        lines.append((name,))
        command = root.commands[name]
        if isinstance(command, click.Group):
            lines += [(name, sub) for sub in command.commands]
    return lines


def _options(path: tuple[str, ...]) -> list[str]:
    command: click.Command = typer.main.get_command(build())
    for name in path:
        assert isinstance(command, click.Group)
        command = command.commands[name]
    return [o for p in command.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-")]


@pytest.mark.parametrize("path", _commands(), ids=lambda p: " ".join(p) or "ringleader")
def test_help_fits_80_columns_with_every_option_name_whole(path: tuple[str, ...]) -> None:
    app = typer.main.get_command(build())
    result = CliRunner().invoke(app, [*path, "--help"], terminal_width=WIDTH)
    assert result.exit_code == 0, result.output
    text = result.output
    words = set(text.replace(",", " ").replace("/", " ").split())
    for option in _options(path):
        assert option in words, f"{option} is not shown whole in:\n{text}"
    wide = [line for line in text.splitlines() if len(line) > WIDTH]
    assert not wide, f"lines wider than {WIDTH}: {wide}"
    assert "…" not in text and "\\[" not in text and "[default: None]" not in text
