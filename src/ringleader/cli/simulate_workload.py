"""``ringleader simulate --workload``: a workload file played under one policy."""

from __future__ import annotations

from pathlib import Path

from ringleader.cli.errors import fail, write_json
from ringleader.cli.reporting import console, progress_bar, write_plot
from ringleader.cli.simulate_policy import policy_for
from ringleader.cli.simulate_report import (
    job_rows,
    print_failures,
    print_summary,
    print_users,
)
from ringleader.perf.profile_files import ProfileError
from ringleader.policy.catalog import with_types
from ringleader.policy.profile.sources import PolicyInputError
from ringleader.sim.engine import Simulator
from ringleader.sim.errors import SimulationStalled
from ringleader.sim.workload_file import load_workload
from ringleader.sim.workload_spec import WorkloadFileError


def play_workload(
    path: Path,
    policy_name: str,
    quantum_s: float | None,
    thresholds: str | None,
    json_path: Path | None,
    plot: Path | None,
    type_agnostic: bool = False,
    tick_s: float | None = None,
) -> None:
    """Play the workload file at ``path`` under ``policy_name`` (with its settings,
    flags first); print the summary and users' shares, write ``--json`` and ``--plot``."""
    try:
        workload = load_workload(path)
    except WorkloadFileError as err:
        fail(str(err))
    settings = workload.spec.simulation
    if tick_s is None:
        tick_s = settings.tick_s
    chosen = with_types(policy_for(policy_name, quantum_s, thresholds, settings), not type_agnostic)
    racks = workload.spec.topology
    if racks is not None:
        placed = racks.placed(chosen)
        if placed is None:
            fail(
                f"{path}: topology.placement: {policy_name} places jobs its own way; "
                "give placement: blind, or a policy with a place stage (e.g. ringleader)"
            )
        chosen = placed
    failures = workload.failures()
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
                failures=failures,
                topology=None if racks is None else racks.topology(),
            ).run()
        except (SimulationStalled, PolicyInputError, ProfileError) as err:
            fail(f"{path}: {err}")
    print_summary(result, workload.cluster.capacity)
    users = print_users(result, workload.cluster.capacity, settings.user_weights)
    lost = None if failures is None else print_failures(failures)
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
                "jobs": job_rows(result),
                "failures": lost,
            },
        )
        console.print(f"wrote {json_path}")
    if plot is not None:
        from ringleader.report.plots import run_overview

        jcts = [r.jct / 3600 for r in result.records if r.jct is not None]
        title = f"{path.name}: {policy_name}"
        gpus = workload.cluster.capacity
        write_plot(plot, lambda: run_overview(jcts, result.usage, gpus, plot, title=title))
