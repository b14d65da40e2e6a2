"""``ringleader import``: another simulator's workload, written as a ringleader workload file.

``ringleader import pollux WORKLOAD.csv -o FILE.yaml`` writes Pollux's testbed
(16 x 4 GPUs, 60 s rounds and ticks, 30 s restarts, Tiresias' queues at 16
GPU-hours), a measured model per application pointing at its profile folder,
and each row as a job at its GPUs and global batch: ``ringleader simulate
--workload FILE.yaml --policy P`` then plays what ``--pollux`` plays.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer

from ringleader.cli.errors import check_output_file, fail
from ringleader.cli.reporting import console

importing = typer.Typer(
    help="Write another simulator's workload as a ringleader workload file.",
    no_args_is_help=True,
)


@importing.command("pollux")
def pollux_workload(
    workload: Annotated[
        str,
        typer.Argument(
            help="A Pollux workload CSV (name,time,application,num_replicas,batch_size), "
            "or a bundled one: pollux:workload-1, pollux:workload-1:1.5."
        ),
    ],
    output: Annotated[Path, typer.Option("-o", "--output", help="The workload file to write.")],
    profiles: Annotated[
        Path | None,
        typer.Option(help="The profiles folder, one subfolder per application (default: bundled)."),
    ] = None,
    adaptive: Annotated[
        bool,
        typer.Option(help="Jobs pick their own batch as they train, as in Pollux's own runs."),
    ] = False,
) -> None:
    """Write a Pollux workload and its profiles as a ringleader workload file."""
    import yaml

    from ringleader.cli.simulate_pollux import bundled
    from ringleader.perf.profile_files import ProfileError
    from ringleader.sim import pollux

    check_output_file("--output", output)
    found = bundled(workload)
    path = Path(workload) if found is None else found[0]
    traces = (profiles or pollux.DATA / "traces").resolve()
    try:
        rows = pollux.read_workload(path)
        pollux.pollux_jobs(path, traces)  # every row and profile checked, as --pollux would
    except ProfileError as err:
        fail(str(err))
    document = _workload(rows, traces, output.resolve().parent, adaptive)
    output.write_text(
        f"# Imported from {path.name} (Pollux, OSDI'21): ringleader import pollux\n"
        + yaml.safe_dump(document, sort_keys=False)
    )
    gpus = f"{pollux.NODES} x {pollux.GPUS_PER_NODE} GPUs"
    console.print(f"wrote {output}: {len(rows)} jobs on {gpus}")


def _workload(rows: list[Any], traces: Path, here: Path, adaptive: bool) -> dict[str, Any]:
    """The workload file's contents: profile paths relative to where it is written where
    the profiles are beside it, else absolute (the bundled ones)."""
    from ringleader.sim import pollux

    models: dict[str, Any] = {}
    for row in rows:
        if row.application in models:
            continue
        app = pollux.APPLICATIONS.get(row.application, pollux.Application())
        folder = traces / row.application
        beside = folder.is_relative_to(here)
        where = os.path.relpath(folder, here) if beside else str(folder)
        model: dict[str, Any] = {"profile": where}
        if app.epochs is not None:
            model["epochs"] = app.epochs
        if app.max_micro_batch is not None:
            model["max_micro_batch"] = app.max_micro_batch
        if adaptive and app.adapts:
            model["adaptive"] = True
        models[row.application] = model
    jobs = []
    for row in rows:
        app = pollux.APPLICATIONS.get(row.application, pollux.Application())
        job: dict[str, Any] = {
            "name": row.name,
            "model": row.application,
            "submit_s": row.time,
            "gpus": row.gpus,
            "global_batch": row.batch,
        }
        if app.max_gpus is not None:
            job["max_gpus"] = max(app.max_gpus, row.gpus)
        jobs.append(job)
    return {
        "version": 1,
        "cluster": {"nodes": pollux.NODES, "gpus_per_node": pollux.GPUS_PER_NODE},
        "simulation": {
            "restart_delay_s": pollux.RESTART_S,
            "round_s": pollux.ROUND_S,
            "tick_s": pollux.ROUND_S,
            "tiresias_thresholds_gpu_s": list(pollux.TIRESIAS_THRESHOLDS_GPU_S),
        },
        "measured_models": models,
        "jobs": jobs,
    }
