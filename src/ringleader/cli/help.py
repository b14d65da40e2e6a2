"""``--help`` as plain text that fits any terminal: click's layout, not rich's panels.

Typer draws options as a rich table whose columns share the width, so at 80
columns an option's name no wider than ``--max-progress-mib`` is cut to
``--max-progress-m…``, and what a user must type is the one thing they cannot
read. Click's own layout never cuts a name: where the name column would be too
wide, the help starts on the next line. The commands use it through
``PlainHelpCommand`` and ``PlainHelpGroup`` (``cli.app.build``).
"""

from __future__ import annotations

import re

import click
import typer.core

_NO_DEFAULT = re.compile(r"\s*\\?\[default: None\]")
"""Typer writes ``[default: None]`` for a flag that has no default: nothing to say."""


def _plain(formatter: click.HelpFormatter) -> None:
    """Typer escapes ``[`` for rich markup even in plain text (``\\[default: 1]``)."""
    formatter.buffer = [_NO_DEFAULT.sub("", part).replace("\\[", "[") for part in formatter.buffer]


class PlainHelpCommand(typer.core.TyperCommand):
    """A command whose ``--help`` is click's plain layout."""

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        click.Command.format_help(self, ctx, formatter)
        _plain(formatter)


class PlainHelpGroup(typer.core.TyperGroup):
    """A group (``ringleader``, ``ringleader users``) whose ``--help`` is click's plain
    layout, its commands listed by name and first line."""

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        click.Group.format_help(self, ctx, formatter)
        _plain(formatter)


def plain_help(app: typer.Typer) -> typer.Typer:
    """``app`` with every command and group of it, nested ones too, on the plain layout."""
    app.info.cls = PlainHelpGroup
    for command in app.registered_commands:
        command.cls = PlainHelpCommand
    for group in app.registered_groups:
        group.cls = PlainHelpGroup
        if group.typer_instance is not None:
            plain_help(group.typer_instance)
    return app
