"""``ringleader fidelity``: does the simulator predict the runtime?

Runs a workload of real jobs on a local server once per policy, then replays
each run in the simulator with the costs the run measured, and reports real
against simulated completion times.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from ringleader.cli import terminal
from ringleader.cli.errors import check_output_dir, check_output_file, fail, write_json
from ringleader.fidelity import (
    Comparison,
    FidelityFileError,
    RealRunError,
    check_unused,
    compare,
    fidelity_plot,
    load_fidelity_workload,
    measure,
    replay,
    run_real,
)
from ringleader.policy.catalog import POLICY_NAMES, policy_named
from ringleader.runtime.local_server import LocalServerError
from ringleader.spine.needs import ON_SLURM, RUNTIME, PolicyNotServed, serve_policy

console = terminal.console(stderr=True)
EXECUTORS = ("local", "slurm")


def fidelity(
    workload: Annotated[
        Path, typer.Argument(help="A fidelity workload YAML (see examples/fidelity.yaml).")
    ],
    policies: Annotated[
        str | None,
        typer.Option(help="Comma-separated policies to compare (default: the file's 'policies')."),
    ] = None,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Write the per-policy comparison here.")
    ] = None,
    plot: Annotated[
        Path | None, typer.Option(help="Plot simulated against real JCT per job (.png/.svg/.pdf).")
    ] = None,
    work_dir: Annotated[
        Path | None,
        typer.Option(
            help="Keep each real run's server log, state and records here (default: a temp dir)."
        ),
    ] = None,
    timeout: Annotated[
        float,
        typer.Option(
            min=10, max=86_400, help="Give up on a policy's real run after this many seconds."
        ),
    ] = 900,
    executor: Annotated[
        str,
        typer.Option(
            help="Where the real jobs run: 'local' (the workload's devices on this machine) "
            "or 'slurm' (the Slurm cluster this machine's Slurm commands reach, with as "
            "many GPUs as the workload's devices)."
        ),
    ] = "local",
) -> None:
    """Run a workload for real, replay it in the simulator, and compare.

    For each policy: start `ringleader server` on this machine with the
    workload's devices (or, with --executor slurm, on the Slurm cluster this
    machine's Slurm commands reach, replayed on its nodes), submit its real
    training jobs at their arrival times, wait for them all; then replay the
    same arrivals in the simulator with the minibatch times, start-up,
    restart and suspend/resume costs the run measured and CPU cores shared as
    the server pinned them. Reports real
    and simulated average JCT, makespan and each job's pair.
    """
    try:
        spec = load_fidelity_workload(workload)
    except FidelityFileError as err:
        fail(str(err))
    names = _policies(spec.policies, policies, executor)
    if json_path is not None:
        check_output_file("--json", json_path)
    if plot is not None:
        check_output_file("--plot", plot, needs_suffix=True)
    root = work_dir or Path(tempfile.mkdtemp(prefix="ringleader-fidelity-"))
    check_output_dir("--work-dir", root)
    for name in names:
        try:
            check_unused(root / name)
        except RealRunError as err:
            fail(f"--work-dir: {err}")
    console.print(f"real runs keep their server logs and records in {root}")
    results: dict[str, Comparison] = {}
    for name in names:
        results[name] = _one(spec, name, root / name, timeout, executor)
    _show(results)
    if json_path is not None:
        payload: dict[str, Any] = {
            "workload": str(workload),
            "policies": {n: c.as_dict() for n, c in results.items()},
        }
        write_json("--json", json_path, payload)
        console.print(f"wrote {json_path}")
    if plot is not None:
        fidelity_plot(results, plot)
        console.print(f"wrote {plot}")


def _policies(listed: Any, given: str | None, executor: str) -> list[str]:
    """The policies to compare (``--policies``, else the file's), each one the chosen
    executor can serve; exits 2 naming the first that is not."""
    if executor not in EXECUTORS:
        fail(f"--executor: {executor!r} is not one of {', '.join(EXECUTORS)}")
    names = [p.strip() for p in (given or ",".join(listed)).split(",") if p.strip()]
    if not names:
        fail("--policies: name at least one policy (or list them under 'policies' in the file)")
    for name in names:
        if name not in POLICY_NAMES:
            fail(f"--policies: unknown policy {name!r}; `ringleader policies` lists them")
        try:
            serve_policy(policy_named(name), ON_SLURM if executor == "slurm" else RUNTIME)
        except PolicyNotServed as err:
            fail(f"--policies: {err}")
    return names


def _one(spec: Any, name: str, where: Path, timeout: float, executor: str) -> Comparison:
    where.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    total = len(spec.jobs)
    with console.status(f"{name}: starting the server") as status:

        def progress(elapsed: float, jobs: list[dict[str, Any]]) -> None:
            done = sum(1 for j in jobs if j["state"] in ("succeeded", "failed", "cancelled"))
            running = sum(1 for j in jobs if j["state"] == "running")
            status.update(
                f"{name}: real run {elapsed:.0f} s, {len(jobs)}/{total} submitted, "
                f"{running} running, {done} done"
            )

        try:
            run = run_real(
                spec, name, where, timeout_s=timeout, on_progress=progress, executor=executor
            )
        except (RealRunError, LocalServerError) as err:
            fail(f"{name}: {err}")
        wall = time.monotonic() - started
        (where / "real.json").write_text(json.dumps(run.to_json()) + "\n")
        failed = [j.name for j in run.jobs if j.state != "succeeded"]
        if failed:
            fail(f"{name}: jobs did not succeed: {', '.join(failed)} (see {where}/server.log)")
        status.update(f"{name}: replaying in the simulator")
        measured = measure(run, {j.name: j.device_time() for j in spec.jobs})
        sim = replay(run, measured, spec)
    result = compare(run, measured, sim, wall)
    console.print(
        f"{name}: real avg JCT {result.real_avg_jct_s:.1f} s, simulated "
        f"{result.sim_avg_jct_s:.1f} s ({result.avg_jct_error:+.1%}); real run took {wall:.0f} s"
    )
    return result


def _show(results: dict[str, Comparison]) -> None:
    table = Table(title="fidelity: real vs simulated")
    for col in ("policy", "job", "real JCT (s)", "sim JCT (s)", "sim/real"):
        table.add_column(col, justify="right" if "(s)" in col or "/" in col else "left")
    for name, c in results.items():
        for j in c.jobs:
            ratio = j["sim_jct_s"] / j["real_jct_s"]
            table.add_row(
                name, j["name"], f"{j['real_jct_s']:.1f}", f"{j['sim_jct_s']:.1f}", f"{ratio:.3f}"
            )
        table.add_row(
            name,
            "average",
            f"{c.real_avg_jct_s:.1f}",
            f"{c.sim_avg_jct_s:.1f}",
            f"{c.avg_jct_error + 1:.3f}",
            style="bold",
        )
        table.add_row(
            name,
            "makespan",
            f"{c.real_makespan_s:.1f}",
            f"{c.sim_makespan_s:.1f}",
            f"{c.sim_makespan_s / c.real_makespan_s:.3f}",
            end_section=True,
        )
    terminal.console().print(table)
