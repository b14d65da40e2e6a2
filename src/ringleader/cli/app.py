"""The ``ringleader`` command: entry point and command registry."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from ringleader import __version__
from ringleader.cli.automl import automl
from ringleader.cli.demo import demo
from ringleader.cli.fidelity import fidelity
from ringleader.cli.netlab import netlab
from ringleader.cli.run import run
from ringleader.cli.runtime import cancel, jobs, logs, server, show, submit
from ringleader.cli.simulate import simulate
from ringleader.cli.sweep import sweep

app = typer.Typer(
    name="ringleader",
    help=(
        "ringleader schedules deep-learning training jobs on shared GPU clusters: elastic "
        "allreduce allocation (doubling heuristic), Gandiva-style sharing and TensorLights "
        "traffic priority, with one policy core for the simulator and the runtime."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command()(simulate)
for command in (
    server,
    submit,
    run,
    jobs,
    show,
    logs,
    cancel,
    demo,
    fidelity,
    netlab,
    sweep,
    automl,
):
    app.command()(command)


@app.command()
def policies() -> None:
    """List the policies you can name in --policy and in config files.

    "needs" is what the policy relies on; "server" says whether `ringleader
    server` runs it as is, with a measured profiling phase standing in for
    the speed models the simulator gives it, or not at all (an oracle).
    """
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
            server = "yes" if served is policy else "yes, measured profiling"
        except PolicyNotServed:
            server = "no (oracle)" if policy.needs.oracle else "no"
        table.add_row(name, describe(name), policy.needs.describe(), server)
    Console().print(table)


@app.command()
def version() -> None:
    """Print ringleader's version."""
    typer.echo(__version__)


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        raise SystemExit(130) from None
