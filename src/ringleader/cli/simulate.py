"""``ringleader simulate``: reproduce a seed's table, or play your own workload."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from ringleader.cli import terminal
from ringleader.cli.errors import check_output_file, fail, write_json
from ringleader.cli.reporting import progress_bar, write_plot
from ringleader.inputs import parse_thresholds, thresholds_problem
from ringleader.policy.catalog import POLICY_NAMES, UnknownPolicyError, with_types
from ringleader.policy.model.plan import Decider
from ringleader.policy.profile.sources import PolicyInputError
from ringleader.sim.contention import GavelContention
from ringleader.sim.engine import Simulator
from ringleader.sim.errors import SimulationStalled
from ringleader.sim.result import SimResult
from ringleader.sim.workload_file import load_workload
from ringleader.sim.workload_spec import WorkloadFileError

SCENARIO_NAMES = "table3, tensorlights, gandiva-cluster, automl, heterogeneity"
"""For --help without importing the scenarios (``ringleader.cli.scenarios`` registers them)."""
console = terminal.console()


MAX_SEEDS = 10_000
MAX_PROCESSES = 64


def simulate(
    scenario: Annotated[
        str | None,
        typer.Option(help=f"A named scenario that reproduces a published table: {SCENARIO_NAMES}."),
    ] = None,
    workload: Annotated[
        Path | None,
        typer.Option(help="A workload YAML file (cluster, models, jobs); see examples/."),
    ] = None,
    trace: Annotated[
        str | None,
        typer.Option(help="A trace file, or a bundled one: itp:cluster07, gavel:0e4a51, ..."),
    ] = None,
    trace_format: Annotated[
        str | None, typer.Option("--format", help="itp | itp-elasticflow | gavel (guessed).")
    ] = None,
    gpus: Annotated[
        int | None,
        typer.Option(min=1, help="Cluster GPUs for --trace (default: sized to ~80% load)."),
    ] = None,
    policy: Annotated[
        str | None,
        typer.Option(help=f"Policy for --workload/--trace: {', '.join(POLICY_NAMES)}."),
    ] = None,
    seeds: Annotated[
        int | None,
        typer.Option(min=1, help="Arrival seeds per scenario cell (default 10; tensorlights 3)."),
    ] = None,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Write the results as JSON here.")
    ] = None,
    plot: Annotated[Path | None, typer.Option(help="Write a PNG plot here.")] = None,
    processes: Annotated[
        int | None, typer.Option(min=1, help="Parallel processes (default: one per core).")
    ] = None,
    fifo_model: Annotated[
        str,
        typer.Option(
            help="tensorlights: how FIFO interleaving delays a job: drain (nobody finishes "
            "before the host's backlog empties) or fair (equal shares). See docs/tensorlights.md."
        ),
    ] = "drain",
    quantum_s: Annotated[
        float | None,
        typer.Option(
            min=0.1,
            max=86_400,
            help="Time-slicing quantum: gandiva (default 60), ringleader's last queue (600).",
        ),
    ] = None,
    tiresias_thresholds: Annotated[
        str | None,
        typer.Option(
            help="Attained-service queue thresholds in GPU-seconds for tiresias/ringleader, "
            "comma-separated and rising, e.g. 3600,36000 (empty: one queue)."
        ),
    ] = None,
    gpu_types: Annotated[
        str | None,
        typer.Option(
            help="--trace on mixed GPU types: each type's share of the nodes, e.g. "
            "v100:1,p100:1,k80:1 (types with measured speeds: v100, p100, k80)."
        ),
    ] = None,
    type_agnostic: Annotated[
        bool,
        typer.Option(
            "--type-agnostic",
            help="Place blind to GPU types (the policy's type-agnostic variant), to compare.",
        ),
    ] = False,
    tick_s: Annotated[
        float | None,
        typer.Option(
            min=0.01,
            max=86_400,
            help="--workload/--trace: decide once every this many simulated seconds, over "
            "every event since, as the runtime's controller does once a tick (default: at "
            "every event; a workload file's simulation.tick_s). A tick of 60 plays a large "
            "trace many times faster, at a small cost in queueing (docs/scale.md).",
        ),
    ] = None,
) -> None:
    """Run the simulator: the same policy core the runtime uses, on a virtual clock.

    Either --scenario NAME (for example `table3`, the ring-allreduce paper's
    Table 3: six strategies × three loads × --seeds arrival seeds, printed beside
    the paper's numbers) or --workload FILE --policy NAME.
    """
    if sum(x is not None for x in (scenario, workload, trace)) != 1:
        fail("give exactly one of --scenario NAME, --workload FILE or --trace TRACE")
    if json_path is not None:
        check_output_file("--json", json_path)
    if plot is not None:
        check_output_file("--plot", plot, needs_suffix=True)
    if seeds is None:
        seeds = 3 if scenario in ("tensorlights", "heterogeneity") else 10
    if seeds > MAX_SEEDS:
        fail(
            f"--seeds: {seeds} is more than {MAX_SEEDS}; confidence intervals are tight long before"
        )
    if processes is not None and processes > MAX_PROCESSES:
        fail(f"--processes: {processes} is more than {MAX_PROCESSES}")
    if gpu_types is not None and trace is None:
        fail("--gpu-types applies to --trace (a workload file names its types under cluster)")
    if type_agnostic and scenario is not None:
        fail("--type-agnostic applies to --workload and --trace; a scenario runs both variants")
    if tick_s is not None and scenario is not None:
        fail("--tick-s applies to --workload and --trace; a scenario decides as its paper did")
    if trace is not None:
        if policy is None:
            fail(f"--trace needs --policy NAME; choose one of: {', '.join(POLICY_NAMES)}")
        chosen = _chosen(policy, quantum_s, tiresias_thresholds, None)
        _trace(
            trace,
            trace_format,
            gpus,
            with_types(chosen, not type_agnostic),
            chosen.name if not type_agnostic else f"{policy} (type-agnostic)",
            json_path,
            plot,
            gpu_types,
            tick_s,
        )
        return
    if scenario is not None:
        if policy is not None or quantum_s is not None or tiresias_thresholds is not None:
            fail(
                "--policy, --quantum-s and --tiresias-thresholds apply to --workload and "
                "--trace; a scenario runs its own strategies"
            )
        from ringleader.cli.scenarios import SCENARIOS, ScenarioRequest

        chosen_scenario = SCENARIOS.get(scenario)
        if chosen_scenario is None:
            fail(
                f"--scenario: unknown scenario {scenario!r}; choose one of: {', '.join(SCENARIOS)}"
            )
        chosen_scenario.run(ScenarioRequest(seeds, json_path, plot, processes, fifo_model))
        return
    assert workload is not None
    if policy is None:
        fail(f"--workload needs --policy NAME; choose one of: {', '.join(POLICY_NAMES)}")
    _workload(
        workload, policy, quantum_s, tiresias_thresholds, json_path, plot, type_agnostic, tick_s
    )


def _chosen(
    name: str, quantum_s: float | None, thresholds: str | None, file_settings: Any
) -> Decider:
    """The policy ``name`` with the settings given (flags over the workload file's)."""
    from ringleader.policy.catalog import SettingNotUsed, policy_from_config

    flagged: tuple[float, ...] | None = None
    if thresholds is not None:
        try:
            flagged = parse_thresholds(thresholds)
        except ValueError as err:
            fail(f"--tiresias-thresholds: {err}")
    try:
        # A flag names a knob the policy must have; a file's settings serve every policy
        # it is run with, so they apply where they can.
        policy_from_config(name, None, quantum_s, flagged, strict=True)
    except UnknownPolicyError as err:
        fail(f"--policy: {err}")
    except SettingNotUsed as err:
        fail(str(err))
    levels = flagged
    if levels is None and file_settings is not None:
        given = file_settings.tiresias_thresholds_gpu_s
        levels = None if given is None else tuple(given)
        if levels is not None:
            _check_levels("simulation.tiresias_thresholds_gpu_s", levels)
    weights = None
    if file_settings is not None:
        weights = file_settings.user_weights
        if quantum_s is None:
            quantum_s = file_settings.quantum_s
    return policy_from_config(name, None, quantum_s, levels, user_weights=weights)


def _print_users(result: Any, capacity: int, weights: dict[str, float]) -> list[dict[str, Any]]:
    """Each user's GPU time against their fair share, where the run had several users."""
    from ringleader.fairness import by_user

    rows = by_user(result.shares, capacity, weights=weights)
    if not rows:
        return []
    table = Table("user", "GPU-h", "fair GPU-h", "worst hour")
    out = []
    for r in rows:
        worst = "-" if r.worst_hour is None else f"{r.worst_hour:.0%}"
        table.add_row(
            r.user or "(none)", f"{r.gpu_s / 3600:.1f}", f"{r.fair_gpu_s / 3600:.1f}", worst
        )
        out.append(
            {
                "user": r.user,
                "gpu_h": round(r.gpu_s / 3600, 3),
                "fair_gpu_h": round(r.fair_gpu_s / 3600, 3),
                "worst_hour": None if r.worst_hour is None else round(r.worst_hour, 4),
            }
        )
    console.print(table)
    console.print(
        "worst hour: the least GPU time a user got in any hour with jobs waiting or "
        "running, as a share of their fair share (weighted max-min over what their jobs "
        "could use)",
        style="dim",
    )
    return out


def _check_levels(where: str, levels: tuple[float, ...]) -> None:
    problem = thresholds_problem(levels)
    if problem is not None:
        fail(f"{where}: {problem}")


def _trace(
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
    _print_summary(result, size)
    s = result.summary
    if json_path is not None:
        write_json(
            "--json",
            json_path,
            {
                "trace": str(path),
                "format": kind,
                "policy": policy_name,
                "gpus": size,
                "speed_model": ASSUMPTION,
                "avg_jct_s": s.avg_jct_s,
                "p99_jct_s": s.p99_jct_s,
                "makespan_s": s.makespan_s,
                "utilization": s.utilization,
                "jobs": s.jobs,
                "tick_s": tick_s,
                "decisions": result.decisions,
                "wall_s": round(result.wall_s, 3),
            },
        )
        console.print(f"wrote {json_path}")
    if plot is not None:
        from ringleader.report.plots import run_overview

        jcts = [r.jct / 3600 for r in result.records if r.jct is not None]
        title = f"{path.name}: {policy_name}"
        write_plot(plot, lambda: run_overview(jcts, result.usage, size, plot, title=title))


def _workload(
    path: Path,
    policy_name: str,
    quantum_s: float | None,
    thresholds: str | None,
    json_path: Path | None,
    plot: Path | None,
    type_agnostic: bool = False,
    tick_s: float | None = None,
) -> None:
    try:
        workload = load_workload(path)
    except WorkloadFileError as err:
        fail(str(err))
    settings = workload.spec.simulation
    if tick_s is None:
        tick_s = settings.tick_s
    chosen = with_types(_chosen(policy_name, quantum_s, thresholds, settings), not type_agnostic)
    with progress_bar() as bar:
        task = bar.add_task(f"{policy_name}: simulating", total=len(workload.jobs))
        try:
            result = Simulator(
                chosen,
                workload.cluster,
                workload.jobs,
                restart_delay_s=settings.restart_delay_s,
                round_s=settings.round_s,
                on_finish=lambda done, _: bar.update(task, completed=done),
                tick_s=tick_s,
                quotas=workload.spec.quotas(),
                explain=json_path is not None,  # each job's waits by reason, for the JSON
            ).run()
        except (SimulationStalled, PolicyInputError) as err:
            fail(f"{path}: {err}")
    _print_summary(result, workload.cluster.capacity)
    users = _print_users(result, workload.cluster.capacity, settings.user_weights)
    if json_path is not None:
        write_json(
            "--json",
            json_path,
            {
                "policy": result.policy,
                "workload": str(path),
                "gpus": workload.cluster.capacity,
                "summary": result.summary.as_dict(),
                "tick_s": tick_s,
                "decisions": result.decisions,
                "counts": result.counts,
                "wall_s": round(result.wall_s, 3),
                "users": users,
                "quotas": workload.spec.quotas(),
                "jobs": [
                    {
                        "id": r.id,
                        "submitted_at": r.submitted_at,
                        "started_at": r.started_at,
                        "finished_at": r.finished_at,
                        "jct_s": r.jct,
                        "resizes": r.resizes,
                        "waited_s": {
                            code: round(seconds, 3)
                            for code, seconds in sorted(result.waits.get(r.id, {}).items())
                        },
                    }
                    for r in result.records
                ],
            },
        )
        console.print(f"wrote {json_path}")
    if plot is not None:
        from ringleader.report.plots import run_overview

        jcts = [r.jct / 3600 for r in result.records if r.jct is not None]
        title = f"{path.name}: {policy_name}"
        gpus = workload.cluster.capacity
        write_plot(plot, lambda: run_overview(jcts, result.usage, gpus, plot, title=title))


def _print_summary(result: SimResult, gpus: int) -> None:
    s = result.summary
    table = Table(title=f"policy {result.policy} on {gpus} GPUs")
    table.add_column("metric")
    table.add_column("value", justify="right")
    rows = [
        ("jobs finished", f"{s.finished} / {s.jobs}"),
        ("average JCT", f"{s.avg_jct_s / 3600:.3f} h"),
        (
            "p50 / p95 / p99 JCT",
            f"{s.p50_jct_s / 3600:.2f} / {s.p95_jct_s / 3600:.2f} / {s.p99_jct_s / 3600:.2f} h",
        ),
        ("average queueing", f"{s.avg_queueing_s / 3600:.3f} h"),
        ("makespan", f"{s.makespan_s / 3600:.2f} h"),
        ("GPU utilisation", f"{s.utilization:.1%}"),
        ("peak jobs in system", str(s.peak_jobs)),
        (
            "resizes / migrations / suspends",
            " / ".join(str(result.counts.get(k, 0)) for k in ("resize", "migration", "suspend")),
        ),
        ("simulation wall time", f"{result.wall_s:.2f} s ({result.decisions} decisions)"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    console.print(table)
