"""``ringleader simulate --trace``: a job trace played under one policy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ringleader.cli.errors import fail, write_json
from ringleader.cli.reporting import console, progress_bar, write_plot
from ringleader.cli.simulate_report import print_summary
from ringleader.policy.model.plan import Decider
from ringleader.policy.profile.sources import PolicyInputError
from ringleader.sim.contention import GavelContention
from ringleader.sim.engine import Simulator
from ringleader.sim.errors import SimulationStalled
from ringleader.sim.result import SimResult


def play_trace(
    name: str,
    fmt: str | None,
    gpus: int | None,
    chosen: Decider,
    policy_name: str,
    json_path: Path | None,
    plot: Path | None,
    gpu_types: str | None = None,
    tick_s: float | None = None,
) -> None:
    """Play the trace ``name`` (a file, or a bundled one) under ``chosen`` on a cluster
    sized to it, or to ``gpus``; print the summary, write ``--json`` and ``--plot``."""
    from ringleader.policy.model.views import ClusterView
    from ringleader.traces.jobs import (
        ASSUMPTION,
        GPUS_PER_NODE,
        parse_type_mix,
        recommended_gpus,
        to_sim_jobs,
        typed_cluster,
        with_type_speeds,
    )
    from ringleader.traces.load import FORMATS, TraceError, load_trace, resolve_trace

    if fmt is not None and fmt not in FORMATS:
        fail(f"--format: {fmt!r} is not one of {', '.join(FORMATS)}")
    try:
        path, kind = resolve_trace(name, fmt)  # type: ignore[arg-type,unused-ignore]
        rows = load_trace(path, kind)
        size = gpus if gpus is not None else recommended_gpus(rows)
        if size < max(r.gpus for r in rows):
            fail(f"--gpus: {size} is fewer than the largest job's {max(r.gpus for r in rows)}")
        jobs = to_sim_jobs(rows)
        mix = parse_type_mix(gpu_types) if gpu_types is not None else None
    except TraceError as err:
        fail(str(err))
    nodes, extra = divmod(size, GPUS_PER_NODE)
    cluster = (
        ClusterView.uniform(nodes, GPUS_PER_NODE) if extra == 0 else ClusterView.uniform(1, size)
    )
    typed = ""
    if mix is not None:
        cluster = typed_cluster(size, mix)
        jobs = with_type_speeds(jobs, rows, cluster.types)
        size = cluster.capacity
        counts = ", ".join(f"{cluster.capacity_of(t)} {t}" for t in cluster.types)
        typed = f" ({counts}; speeds per type from Gavel's table)"
    console.print(
        f"{path.name} ({kind}): {len(jobs)} jobs on {size} GPUs{typed}; speed model: {ASSUMPTION}"
    )
    with progress_bar() as bar:
        task = bar.add_task(f"{policy_name}: simulating", total=len(jobs))
        try:
            result = Simulator(
                chosen,
                cluster,
                jobs,
                on_finish=lambda done, _: bar.update(task, completed=done),
                contention=GavelContention(),
                tick_s=tick_s,
            ).run()
        except (SimulationStalled, PolicyInputError) as err:
            fail(f"{path}: {err}")
    print_summary(result, size)
    if json_path is not None:
        write_json("--json", json_path, _as_json(path, kind, policy_name, size, tick_s, result))
        console.print(f"wrote {json_path}")
    if plot is not None:
        from ringleader.report.plots import run_overview

        jcts = [r.jct / 3600 for r in result.records if r.jct is not None]
        title = f"{path.name}: {policy_name}"
        write_plot(plot, lambda: run_overview(jcts, result.usage, size, plot, title=title))


def _as_json(
    path: Path, kind: str, policy_name: str, gpus: int, tick_s: float | None, result: SimResult
) -> dict[str, Any]:
    """What ``--json`` holds of a trace's run."""
    from ringleader.traces.jobs import ASSUMPTION

    s = result.summary
    return {
        "trace": str(path),
        "format": kind,
        "policy": policy_name,
        "gpus": gpus,
        "speed_model": ASSUMPTION,
        "avg_jct_s": s.avg_jct_s,
        "p99_jct_s": s.p99_jct_s,
        "makespan_s": s.makespan_s,
        "utilization": s.utilization,
        "jobs": s.jobs,
        "tick_s": tick_s,
        "decisions": result.decisions,
        "wall_s": round(result.wall_s, 3),
    }
