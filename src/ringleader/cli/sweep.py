"""``ringleader sweep``: many trace simulations from one YAML grid."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ringleader.cli import terminal
from ringleader.cli.errors import fail
from ringleader.cli.reporting import progress_bar

console = terminal.console()


def sweep(
    config: Annotated[Path, typer.Argument(help="Sweep YAML; see examples/sweep.yaml.")],
) -> None:
    """Run every (trace, GPUs, load scale, policy, seed) in the grid, in parallel.

    Writes OUT/results.csv (one row per run: JCT mean and percentiles,
    queueing, makespan, utilisation, wall time) and OUT/jct_vs_load.png,
    OUT/jct_cdf.png, OUT/utilization.png.
    """
    from ringleader.scenarios.sweep import SweepError, load_sweep, run_sweep

    try:
        spec = load_sweep(config)
    except SweepError as err:
        fail(str(err))
    total = (
        len(spec.traces)
        * len(spec.gpus)
        * len(spec.load_scale)
        * len(spec.policies)
        * len(spec.seeds)
    )
    progress = progress_bar()
    with progress:
        task = progress.add_task(f"sweep: {total} simulations", total=total)
        try:
            rows = run_sweep(spec, on_done=lambda _: progress.advance(task))
        except SweepError as err:
            fail(f"{config}: {err}")
    console.print(
        f"{len(rows)} runs; wrote {spec.out}/results.csv, jct_vs_load.png, jct_cdf.png, "
        "utilization.png"
    )
