"""``ringleader sweep``: many trace simulations from one YAML grid."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from ringleader.cli import terminal
from ringleader.cli.errors import fail
from ringleader.cli.reporting import progress_bar

if TYPE_CHECKING:
    from ringleader.scenarios.sweep import Row

console = terminal.console()


def summary(rows: Sequence[Row]) -> Table:
    """One line per (trace, GPUs, load, policy), means over seeds, and each policy's
    average JCT over the best one's at that point: what a reader of the sweep wants
    before opening the CSV."""
    cells: dict[tuple[str, int, float, str], list[Row]] = defaultdict(list)
    for r in rows:
        cells[(r.trace, r.gpus, r.load_scale, r.policy)].append(r)
    means = {k: sum(r.avg_jct_s for r in v) / len(v) for k, v in cells.items()}
    best: dict[tuple[str, int, float], float] = {}
    for (trace, gpus, load, _), avg in means.items():
        point = (trace, gpus, load)
        best[point] = min(avg, best.get(point, avg))
    lines = []
    for key in sorted(cells):
        runs = cells[key]
        p95 = sum(r.p95_jct_s for r in runs) / len(runs)
        util = sum(r.utilization for r in runs) / len(runs)
        trace, gpus, load, policy = key
        ratio = means[key] / best[(trace, gpus, load)] if best[(trace, gpus, load)] else 1.0
        lines.append(
            (
                *(trace, str(gpus), f"{load:g}", policy, str(len(runs))),
                *(f"{means[key] / 3600:.2f}", f"{p95 / 3600:.2f}", f"{ratio:.2f}x"),
                f"{util:.0%}",
            )
        )
    # No cell is cut: 80 columns hold a sweep of ITP traces.
    table = terminal.compact_table("sweep: means over seeds")
    heads = ["trace", "GPUs", "load", "policy", "seeds", "avg\nJCT h", "p95\nJCT h", "vs\nbest"]
    heads.append("util")
    for name, wide in zip(heads, terminal.whole_widths(heads, lines), strict=True):
        table.add_column(
            name,
            justify="left" if name in ("trace", "policy") else "right",
            no_wrap=True,
            min_width=wide,
        )
    for line in lines:
        table.add_row(*line)
    return table


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
    console.print(summary(rows))
    console.print(
        f"{len(rows)} runs; wrote {spec.out}/results.csv, jct_vs_load.png, jct_cdf.png, "
        "utilization.png"
    )
