"""The ``ringleader`` command: entry point and command registry.

Commands are registered by name and module, and a command's module is
imported only when that command runs: ``ringleader jobs`` never pays for the
simulator's numpy and scipy (about 0.5 s here). ``ringleader --help`` imports
them all, to list them.
"""

from __future__ import annotations

import importlib
import sys

import typer

from ringleader import __version__
from ringleader.cli.help import plain_help

COMMANDS: dict[str, str] = {
    "simulate": "ringleader.cli.simulate",
    "server": "ringleader.cli.server",
    "submit": "ringleader.cli.runtime",
    "run": "ringleader.cli.run",
    "jobs": "ringleader.cli.runtime",
    "show": "ringleader.cli.runtime",
    "logs": "ringleader.cli.runtime",
    "cancel": "ringleader.cli.runtime",
    "users": "ringleader.cli.users",
    "login": "ringleader.cli.users",
    "whoami": "ringleader.cli.users",
    "dashboard": "ringleader.cli.dashboard",
    "demo": "ringleader.cli.demo",
    "fidelity": "ringleader.cli.fidelity",
    "netlab": "ringleader.cli.netlab",
    "sweep": "ringleader.cli.sweep",
    "automl": "ringleader.cli.automl",
    "import": "ringleader.cli.importing:importing",
    "policies": "ringleader.cli.app",
    "version": "ringleader.cli.app",
}
"""Each command's name and the module that defines the function of that name (or
``module:attribute``, for a name Python keeps to itself), in help order."""

HELP = (
    "ringleader schedules deep-learning training jobs on shared GPU clusters: elastic "
    "allreduce allocation (doubling heuristic), Gandiva-style sharing and TensorLights "
    "traffic priority, with one policy core for the simulator and the runtime."
)


def policies() -> None:
    """List the policies you can name in --policy and in config files.

    "needs" is what the policy relies on; "server" says whether `ringleader
    server` runs it as is, with a measured profiling phase standing in for
    the speed models the simulator gives it, or not at all (an oracle); a
    policy's traffic priorities are applied where the server has
    `--traffic-device`.
    """
    from rich.console import Console
    from rich.table import Table

    from ringleader.policy.catalog import POLICY_NAMES, describe, policy_named
    from ringleader.spine.needs import RUNTIME, PolicyNotServed, serve_policy

    table = Table(title="policies")
    table.add_column("name")
    table.add_column("what it does")
    table.add_column("needs")
    table.add_column("server")
    for name in POLICY_NAMES:
        policy = policy_named(name)
        try:
            served = serve_policy(policy, RUNTIME)
            server = ", ".join(
                ["yes"]
                + ["measured profiling"] * (served.needs.profiling and not policy.needs.profiling)
                + ["traffic with --traffic-device"]
                * (policy.needs.traffic and not served.needs.traffic)
            )
        except PolicyNotServed:
            server = "no (oracle)" if policy.needs.oracle else "no"
        table.add_row(name, describe(name), policy.needs.describe(), server)
    Console().print(table)


def version() -> None:
    """Print ringleader's version."""
    typer.echo(__version__)


def build(names: list[str] | None = None) -> typer.Typer:
    """The command line with ``names`` registered (None: every command)."""
    app = typer.Typer(
        name="ringleader",
        help=HELP,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )

    @app.callback()
    def root() -> None:
        # A group even with one command registered: `ringleader jobs` keeps its name.
        pass

    root.__doc__ = HELP
    for name in names if names is not None else list(COMMANDS):
        module, _, attribute = COMMANDS[name].partition(":")
        command = getattr(importlib.import_module(module), attribute or name)
        if isinstance(command, typer.Typer):  # a group of subcommands: `ringleader users add`
            app.add_typer(command, name=name)
        else:
            app.command(name=name)(command)
    return plain_help(app)


def _wanted(argv: list[str]) -> list[str] | None:
    """The one command ``argv`` runs, when it names one; None: build them all (help)."""
    return [argv[0]] if argv and argv[0] in COMMANDS else None


def main() -> None:
    try:
        build(_wanted(sys.argv[1:]))()
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        raise SystemExit(130) from None
