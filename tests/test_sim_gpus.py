"""Each simulated job's GPUs over time (``simulate --json``'s per-job ``gpus``, issue 59
item 12), held against the cluster's GPU use, which the simulator counts apart."""

from __future__ import annotations

from pathlib import Path

from ringleader.policy.catalog import policy_named
from ringleader.sim.engine import Simulator
from ringleader.sim.workload_file import load_workload

EXAMPLE = Path(__file__).parents[1] / "examples" / "workload.yaml"


def _gpu_seconds(steps: list[tuple[float, int]], end: float) -> float:
    times = [t for t, _ in steps] + [end]
    return sum(n * (times[i + 1] - times[i]) for i, (_, n) in enumerate(steps))


def test_every_jobs_gpus_over_time_add_up_to_the_clusters_busy_gpus() -> None:
    workload = load_workload(EXAMPLE)
    settings = workload.spec.simulation
    result = Simulator(
        policy_named("precompute"),
        workload.cluster,
        workload.jobs,
        restart_delay_s=settings.restart_delay_s,
        round_s=settings.round_s,
        explain=True,
    ).run()
    end = result.ended_at
    jobs = sum(_gpu_seconds(steps, end) for steps in result.gpus.values())
    usage = [(p.time, p.busy) for p in result.usage]
    assert jobs > 0
    assert abs(jobs - _gpu_seconds(usage, end)) < 1e-6 * jobs
    records = {r.id: r for r in result.records}
    for job, steps in result.gpus.items():
        assert steps[0][0] == records[job].started_at  # placed when it started
        assert steps[-1] == (records[job].finished_at, 0)  # and gave all back at the end
        times = [t for t, _ in steps]
        assert times == sorted(set(times))
    resized = [job for job, steps in result.gpus.items() if len({n for _, n in steps}) > 2]
    assert resized  # the doubling heuristic grew some of the elastic jobs
    assert all(records[j].resizes > 0 for j in resized)


def test_a_run_that_is_not_explained_keeps_no_timeline() -> None:
    workload = load_workload(EXAMPLE)
    result = Simulator(policy_named("fifo"), workload.cluster, workload.jobs).run()
    assert result.gpus == {}
