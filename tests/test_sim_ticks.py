"""The simulator deciding once a tick (``Simulator(tick_s=...)``, ``ringleader.sim.ticks``)."""

import json
import math
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from ringleader.policy import ClusterView, policy_named
from ringleader.policy.model.plan import Assignment, Decider, Plan
from ringleader.policy.model.views import Device, JobView
from ringleader.sim import RESNET110_K40, SimJob, Simulator
from ringleader.sim.arrivals import poisson_arrivals
from ringleader.sim.ticks import tick_at_or_after

DELAY = 3.8
P = RESNET110_K40


class Watched:
    """A policy that records when it was asked."""

    def __init__(self, policy: Decider) -> None:
        self.policy = policy
        self.name = policy.name
        self.needs = policy.needs
        self.asked: list[float] = []

    def decide(self, jobs: Sequence[JobView], cluster: ClusterView, now: float) -> Plan:
        self.asked.append(now)
        return self.policy.decide(jobs, cluster, now)


class PackAll:
    """Every job on GPU 0 of node n0, all running: each pair shares it."""

    name = "pack-all"
    needs = policy_named("fifo").needs

    def decide(self, jobs: Sequence[JobView], cluster: ClusterView, now: float) -> Plan:
        gpu = (Device(cluster.nodes[0].name, 0),)
        return Plan({j.id: Assignment(gpu, 1) for j in jobs})


def _poisson(count: int, mean_s: float) -> list[SimJob]:
    arrivals = poisson_arrivals(count, mean_s, seed=3)
    return [SimJob(f"j{i:04d}", t, P, max_gpus=8) for i, t in enumerate(arrivals)]


def test_the_tick_an_event_is_decided_at() -> None:
    assert tick_at_or_after(0.0, 60.0) == 0.0
    assert tick_at_or_after(60.0, 60.0) == 60.0
    assert tick_at_or_after(60.5, 60.0) == 120.0
    assert tick_at_or_after(0.3, 0.1) >= 0.3  # never before the event, rounding or not


@pytest.mark.parametrize("tick", [0.0, -1.0, math.inf, math.nan])
def test_a_tick_must_be_positive_and_finite(tick: float) -> None:
    with pytest.raises(ValueError, match="tick_s"):
        Simulator(policy_named("fifo"), ClusterView.uniform(1, 8), [], tick_s=tick)


def test_decisions_come_only_at_ticks_and_take_every_event_since() -> None:
    jobs = _poisson(300, 20.0)  # a queue builds: many events a minute
    every = Watched(policy_named("precompute"))
    ticked = Watched(policy_named("precompute"))
    base = Simulator(every, ClusterView.uniform(4, 8), jobs, round_s=None).run()
    result = Simulator(ticked, ClusterView.uniform(4, 8), jobs, round_s=None, tick_s=60.0).run()
    assert all(t % 60.0 == 0 for t in ticked.asked)
    assert len(set(ticked.asked)) == len(ticked.asked) == result.decisions
    # One decision for each tick that some arrival or end fell before (or on), but those
    # after the last job ended: nothing is left to decide about.
    events = [r.submitted_at for r in result.records] + [
        r.finished_at for r in result.records if r.finished_at is not None
    ]
    ticks = {tick_at_or_after(t, 60.0) for t in events}
    assert sorted(ticked.asked) == sorted(t for t in ticks if t <= result.ended_at)
    assert result.decisions < 0.8 * base.decisions
    assert result.summary.finished == base.summary.finished == 300
    # A job starts at the first tick at or after it arrives (the cluster is not full).
    for r in result.records:
        assert r.started_at is not None and r.started_at >= r.submitted_at
        assert r.started_at - r.submitted_at < 60.0 or r.started_at % 60.0 == 0


def test_a_lone_job_waits_for_the_tick_and_then_runs_exactly() -> None:
    (record,) = (
        Simulator(
            policy_named("eight"), ClusterView.uniform(1, 8), [SimJob("a", 100.0, P)], tick_s=60.0
        )
        .run()
        .records
    )
    assert record.started_at == 120.0
    # It ends when its work is done, not at a tick.
    assert record.finished_at == pytest.approx(120.0 + DELAY + P.seconds_alone(8), rel=1e-12)


def test_jobs_left_between_ticks_finish_when_every_event_would_finish_them() -> None:
    """Started together and never moved, jobs end at the same times whether every running
    job is advanced at each event or only each job that ends (``sim.ticks.Finishes``)."""
    jobs = [
        SimJob(f"j{i}", 0.0, P, max_gpus=1, requested_gpus=1, elastic=False, work_scale=0.1 + i / 7)
        for i in range(8)
    ]
    base = Simulator(policy_named("fifo"), ClusterView.uniform(1, 8), jobs, round_s=None).run()
    ticked = Simulator(
        policy_named("fifo"), ClusterView.uniform(1, 8), jobs, round_s=None, tick_s=1e6
    ).run()
    ends = {r.id: r.finished_at for r in base.records}
    assert len(ends) == 8 and ticked.decisions == 1
    for r in ticked.records:
        assert r.finished_at == pytest.approx(ends[r.id], rel=1e-12)


def test_a_job_whose_partner_ends_speeds_up_at_once_not_at_the_next_tick() -> None:
    jobs = [
        SimJob("a", 0.0, P, max_gpus=1, requested_gpus=1, elastic=False, work_scale=0.2),
        SimJob("b", 0.0, P, max_gpus=1, requested_gpus=1, elastic=False, work_scale=0.4),
    ]
    base = Simulator(PackAll(), ClusterView.uniform(1, 8), jobs, round_s=None).run()
    ticked = Simulator(PackAll(), ClusterView.uniform(1, 8), jobs, round_s=None, tick_s=1e6).run()
    solo = P.seconds_alone(1)
    ends = {r.id: r.finished_at for r in base.records}
    # Packed, each runs at half speed until a ends; then b runs alone.
    assert ends["a"] == pytest.approx(DELAY + 2 * 0.2 * solo)
    assert ends["b"] == pytest.approx(DELAY + 2 * 0.2 * solo + 0.2 * solo)
    assert ticked.decisions == 1
    for r in ticked.records:
        assert r.finished_at == pytest.approx(ends[r.id], rel=1e-12)


def test_progress_at_the_end_of_a_ticked_run_is_brought_up_to_date() -> None:
    jobs = [SimJob("a", 0.0, P, max_gpus=8)]
    until = 1800.0
    base = Simulator(policy_named("eight"), ClusterView.uniform(1, 8), jobs, until=until).run()
    ticked = Simulator(
        policy_named("eight"), ClusterView.uniform(1, 8), jobs, until=until, tick_s=7200.0
    ).run()
    (done,) = base.progress
    (got,) = ticked.progress
    assert done.done_fraction > 0.1
    assert got.done_fraction == pytest.approx(done.done_fraction, rel=1e-12)


def test_snapshots_see_progress_between_ticks() -> None:
    jobs = [SimJob("a", 0.0, P, max_gpus=8)]
    kw = {"snapshot_at": (1000.0, 2000.0)}
    base = Simulator(policy_named("eight"), ClusterView.uniform(1, 8), jobs, **kw).run()  # type: ignore[arg-type]
    ticked = Simulator(
        policy_named("eight"),
        ClusterView.uniform(1, 8),
        jobs,
        tick_s=7200.0,
        **kw,  # type: ignore[arg-type]
    ).run()
    assert set(ticked.snapshots) == {1000.0, 2000.0}
    for at, seen in base.snapshots.items():
        assert ticked.snapshots[at]["a"] == pytest.approx(seen["a"], rel=1e-12)
        assert seen["a"] > 0


# -- from the command line ----------------------------------------------------------


def _simulate(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "ringleader", "simulate", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_a_trace_and_a_workload_file_decide_once_a_tick(tmp_path: Path) -> None:
    every, ticked = tmp_path / "every.json", tmp_path / "ticked.json"
    trace = ["--policy", "fifo", "--trace", "itp:cluster10"]
    assert _simulate(*trace, "--json", str(every)).returncode == 0
    out = _simulate(*trace, "--tick-s", "60", "--json", str(ticked))
    assert out.returncode == 0, out.stderr
    a, b = json.loads(every.read_text()), json.loads(ticked.read_text())
    assert (a["tick_s"], b["tick_s"]) == (None, 60.0)
    assert b["decisions"] < a["decisions"] and b["jobs"] == a["jobs"] == 260
    workload = tmp_path / "w.yaml"
    workload.write_text(
        "cluster: {nodes: 1, gpus_per_node: 8}\nsimulation: {tick_s: 30}\n"
        "jobs: [{name: a, model: resnet110, submit_s: 10}]\n"
    )
    out = _simulate("--workload", str(workload), "--policy", "eight", "--json", str(ticked))
    assert out.returncode == 0, out.stderr
    (job,) = json.loads(ticked.read_text())["jobs"]
    assert json.loads(ticked.read_text())["tick_s"] == 30.0
    assert job["started_at"] == 30.0  # the first tick after it arrived


def test_a_bad_tick_names_the_field(tmp_path: Path) -> None:
    workload = tmp_path / "w.yaml"
    workload.write_text(
        "cluster: {nodes: 1, gpus_per_node: 8}\nsimulation: {tick_s: 0}\n"
        "jobs: [{name: a, model: resnet110}]\n"
    )
    out = _simulate("--workload", str(workload), "--policy", "eight")
    assert out.returncode == 2 and "simulation.tick_s" in out.stderr
    assert "Traceback" not in out.stderr
    out = _simulate("--scenario", "table3", "--tick-s", "5")
    assert out.returncode == 2 and "--tick-s applies to --workload and --trace" in out.stderr
    out = _simulate("--trace", "itp:cluster10", "--policy", "fifo", "--tick-s", "-1")
    assert out.returncode == 2 and "Traceback" not in out.stderr


def test_a_driver_steers_at_decisions_only() -> None:
    """A driver (a hyper-parameter search) is asked at each decision, with progress
    brought up to date, and ends the run by answering None."""
    asked: list[tuple[float, float]] = []

    class Stopper:
        def steer(self, now: float, done: dict[str, float]) -> dict[str, int] | None:
            asked.append((now, done.get("a", 0.0)))
            return None if now >= 1800.0 else {}

    jobs = [SimJob("a", 0.0, P, max_gpus=8), SimJob("b", 90.0, P, max_gpus=8)]
    result = Simulator(
        policy_named("eight"), ClusterView.uniform(2, 8), jobs, tick_s=600.0, driver=Stopper()
    ).run()
    assert [t for t, _ in asked] == [0.0, 600.0, 1200.0, 1800.0]
    assert asked[-1][1] == pytest.approx((1800.0 - DELAY) / P.seconds_alone(8), rel=1e-9)
    assert result.summary.finished == 0


def test_a_partner_ending_on_a_snapshot_mark_still_speeds_the_other_up() -> None:
    """The mark brings everyone up to date first; the end must still re-index the rest."""
    jobs = [
        SimJob("a", 0.0, P, max_gpus=1, requested_gpus=1, elastic=False, work_scale=0.2),
        SimJob("b", 0.0, P, max_gpus=1, requested_gpus=1, elastic=False, work_scale=0.4),
    ]
    base = Simulator(PackAll(), ClusterView.uniform(1, 8), jobs, round_s=None).run()
    ends = {r.id: r.finished_at for r in base.records}
    assert ends["a"] is not None
    ticked = Simulator(
        PackAll(),
        ClusterView.uniform(1, 8),
        jobs,
        round_s=None,
        tick_s=1e6,
        snapshot_at=(ends["a"],),
    ).run()
    for r in ticked.records:
        assert r.finished_at == pytest.approx(ends[r.id], rel=1e-12)


def test_counting_rounds_as_the_runtime_a_run_decides_on_no_new_speed() -> None:
    # An adaptive job's speed changes at each of its 100 epochs' ends (a phase). By
    # default a ticking run decides at the tick after each; the runtime's controller
    # only records a new speed, and decides on arrivals, ends, wake-ups and a round
    # after its last decision (``events.Rounds``), as the fidelity replay counts.
    from ringleader.perf.measured import read_measured_job
    from ringleader.sim import pollux
    from ringleader.sim.tabled import adaptive_profile

    cifar10 = read_measured_job(pollux.DATA / "traces" / "cifar10", epochs=100)
    profile = adaptive_profile(cifar10, 256, max_gpus=4, per_node=4)
    job = SimJob("solo", 0.3, profile, max_gpus=4, min_gpus=4, requested_gpus=4)
    cluster = ClusterView.uniform(1, 4)
    every = Watched(policy_named("fifo"))
    ran = Simulator(every, cluster, [job], tick_s=0.5, round_s=600.0).run()
    counted = Watched(policy_named("fifo"))
    same = Simulator(
        counted, cluster, [job], tick_s=0.5, round_s=600.0, rounds_after_decisions=True
    ).run()
    assert len(every.asked) > 90
    assert counted.asked == [0.5 + 600.0 * k for k in range(len(counted.asked))]
    assert 0.5 + 600.0 * len(counted.asked) > same.records[0].finished_at
    # A fixed-size job under fifo runs the same whichever events are decided on.
    assert same.records[0].finished_at == pytest.approx(ran.records[0].finished_at, rel=1e-12)
