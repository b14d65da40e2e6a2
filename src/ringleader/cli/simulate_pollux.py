"""``ringleader simulate --pollux``: a Pollux workload CSV on Pollux's testbed, as published.

``--pollux FILE.csv`` plays the file with the profiles in ``--profiles DIR``
(default: the Pollux profiles ringleader ships); ``--pollux pollux:workload-3``
(or ``pollux:workload-3:1.5`` for the 1.5× load) plays a bundled one and prints
the average JCT Pollux's own simulator published for it beside ours, where it
published one for the policy.
"""

from __future__ import annotations

from pathlib import Path

from ringleader.cli.errors import fail, write_json
from ringleader.cli.reporting import console, progress_bar, write_plot
from ringleader.cli.simulate_policy import policy_for
from ringleader.cli.simulate_report import job_rows, print_summary
from ringleader.perf.profile_files import ProfileError
from ringleader.policy.profile.sources import PolicyInputError
from ringleader.sim import pollux
from ringleader.sim.errors import SimulationStalled

TIRESIAS_THRESHOLDS = ",".join(f"{t:g}" for t in pollux.TIRESIAS_THRESHOLDS_GPU_S)


def bundled(spec: str) -> tuple[Path, str, str] | None:
    """``pollux:workload-N[:LOAD]`` → (CSV path, workload name, load); None if not one."""
    if not spec.startswith("pollux:"):
        return None
    name, _, load = spec.removeprefix("pollux:").partition(":")
    load = load or "1.0"
    if load not in pollux.LOADS:
        fail(f"--pollux {spec}: load {load!r} is not one of {', '.join(pollux.LOADS)}")
    path = pollux.bundled_workload(name, load)
    if not path.is_file():
        names = sorted(p.stem for p in path.parent.glob("*.csv"))
        fail(f"--pollux {spec}: no bundled workload {name!r}; choose one of: {', '.join(names)}")
    return path, name, load


def play_pollux(
    spec: str,
    profiles: Path | None,
    policy_name: str,
    quantum_s: float | None,
    thresholds: str | None,
    json_path: Path | None,
    plot: Path | None,
) -> None:
    """Play a Pollux workload under ``policy_name``; print the summary (and Pollux's
    published average beside it), write ``--json`` and ``--plot``."""
    found = bundled(spec)
    path = Path(spec) if found is None else found[0]
    if found is None and not path.is_file():
        fail(f"--pollux {spec}: no such file (or give a bundled one: pollux:workload-1)")
    if policy_name == "tiresias" and thresholds is None:
        thresholds = TIRESIAS_THRESHOLDS
        console.print("tiresias: queues split at 16 GPU-hours, as Pollux ran it", style="dim")
    chosen = policy_for(policy_name, quantum_s, thresholds, None)
    adaptive = policy_name in pollux.ADAPTIVE_POLICIES
    if adaptive:
        console.print("jobs pick their own batch as they train, as in Pollux's runs", style="dim")
    try:
        jobs = pollux.pollux_jobs(path, profiles or pollux.DATA / "traces", adaptive=adaptive)
    except ProfileError as err:
        fail(str(err))
    cluster = pollux.cluster()
    with progress_bar() as bar:
        task = bar.add_task(f"{policy_name}: simulating", total=len(jobs))
        try:
            result = pollux.play(
                jobs,
                chosen,
                on_finish=lambda done, _: bar.update(task, completed=done),
                explain=json_path is not None,
            )
        except (SimulationStalled, PolicyInputError, ProfileError) as err:
            fail(f"{path}: {err}")
    print_summary(result, cluster.capacity)
    reference = None if found is None else pollux.published_avg(policy_name, found[1], found[2])
    if reference is not None and found is not None:
        ours = result.summary.avg_jct_s
        console.print(
            f"Pollux's simulator published {reference:,.0f} s average JCT for {policy_name} "
            f"on {found[1]} at load {found[2]}; ours {ours:,.0f} s ({ours / reference:.3f}×)"
        )
    if json_path is not None:
        write_json(
            "--json",
            json_path,
            {
                "policy": result.policy,
                "pollux_workload": str(path),
                "gpus": cluster.capacity,
                "summary": result.summary.as_dict(),
                "published_avg_jct_s": reference,
                "decisions": result.decisions,
                "counts": result.counts,
                "wall_s": round(result.wall_s, 3),
                "jobs": job_rows(result),
            },
        )
        console.print(f"wrote {json_path}")
    if plot is not None:
        from ringleader.report.plots import run_overview

        jcts = [r.jct / 3600 for r in result.records if r.jct is not None]
        title = f"{path.name}: {policy_name}"
        gpus = cluster.capacity
        write_plot(plot, lambda: run_overview(jcts, result.usage, gpus, plot, title=title))
