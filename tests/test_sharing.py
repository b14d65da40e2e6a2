"""Gandiva's mechanisms: the pure policy stages, the simulator's sharing costs, the scenarios."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from ringleader.perf.epochs import EpochsToConverge
from ringleader.policy.gandiva.sharing import Sharing
from ringleader.policy.model.plan import Plan
from ringleader.policy.model.views import ClusterView, Device, JobShape, JobView, Observation
from ringleader.sim.engine import Simulator
from ringleader.sim.profiles import RESNET110_K40
from ringleader.sim.submitted import SimJob

SHAPE = JobShape(50_000, 128, 1e7)
ONE_GPU = ClusterView.uniform(1, 1)
NO_SHARING = Sharing("no-sharing", time_slicing=False, packing=False, migration=False)


def job(
    name: str,
    *,
    gpus: int = 1,
    at: float = 0.0,
    devices: tuple[Device, ...] = (),
    suspended: bool = False,
    since: float = 0.0,
    priority: int = 0,
    alone: float | None = None,
    packed: dict[str, float] | None = None,
    elastic: bool = False,
    max_gpus: int | None = None,
) -> JobView:
    observations = {gpus: Observation(alone, 600.0, 128)} if alone is not None else {}
    return JobView(
        id=name,
        submitted_at=at,
        shape=SHAPE,
        epochs=EpochsToConverge.constant(10),
        requested_gpus=gpus,
        min_gpus=gpus,
        max_gpus=max_gpus or gpus,
        elastic=elastic,
        devices=devices,
        workers=len(devices),
        suspended=suspended,
        state_since=since,
        priority=priority,
        observations=observations,
        packed={k: Observation(v, 60.0, 128) for k, v in (packed or {}).items()},
    )


D0 = (Device("node0", 0),)


def running(plan: Plan) -> set[str]:
    return {j for j, a in plan.assignments.items() if a.running}


def test_time_slicing_admits_everyone_and_runs_one_per_gpu() -> None:
    jobs = [job(n, at=i) for i, n in enumerate("abc")]
    plan = Sharing(packing=False).decide(jobs, ONE_GPU, now=0.0)
    assert all(plan.of(n).resident and plan.of(n).devices == D0 for n in "abc")
    assert running(plan) == {"a"}
    assert plan.wake_at == 60.0  # the next quantum boundary
    # The baseline queues instead: one resident, the rest wait.
    base = NO_SHARING.decide(jobs, ONE_GPU, now=0.0)
    assert running(base) == {"a"} and not base.of("b").resident


def test_quantum_rotates_to_the_longest_waiting_job() -> None:
    policy = Sharing(packing=False)
    a = job("a", devices=D0, since=0.0)
    b = job("b", devices=D0, suspended=True, since=0.0)
    c = job("c", at=1.0, devices=D0, suspended=True, since=-30.0)
    # Mid-quantum the holder keeps the GPU...
    assert running(policy.decide([a, b, c], ONE_GPU, now=20.0)) == {"a"}
    # ...at the boundary the job suspended longest takes over.
    assert running(policy.decide([a, b, c], ONE_GPU, now=60.0)) == {"c"}


def test_a_resident_whose_place_stands_gets_the_last_decisions_assignment_again() -> None:
    policy = Sharing(packing=False)
    a = job("a", devices=D0, since=0.0)
    b = job("b", devices=D0, suspended=True, since=0.0)
    c = job("c", at=1.0, devices=D0, suspended=True, since=-30.0)
    first = policy.decide([a, b, c], ONE_GPU, now=20.0)
    again = policy.decide([a, b, c], ONE_GPU, now=30.0)
    # Mid-quantum nobody moves: each job gets the very object it had (a body sees it
    # unchanged by identity) ...
    assert all(again.of(n) is first.of(n) for n in "abc")
    # ... and at the boundary the two that swap get new ones, equal to what they are now.
    turned = policy.decide([a, b, c], ONE_GPU, now=60.0)
    assert turned.of("b") is again.of("b")
    for n, suspended in (("a", True), ("c", False)):
        assert turned.of(n) is not again.of(n)
        assert (turned.of(n).devices, turned.of(n).suspended) == (D0, suspended)


def test_a_higher_priority_job_is_never_suspended_for_a_lower_one() -> None:
    policy = Sharing(packing=False)
    low = job("low", devices=D0, since=0.0)
    high = job("high", at=5.0, priority=2)
    plan = policy.decide([low, high], ONE_GPU, now=10.0)
    assert running(plan) == {"high"} and plan.of("low").suspended
    # Across GPUs: a second high-priority job waiting behind its peer is moved
    # to the GPU that runs a low-priority job.
    two = ClusterView.uniform(1, 2)
    d1 = (Device("node0", 1),)
    jobs = [
        job("h1", priority=1, devices=D0, since=0.0),
        job("h2", priority=1, devices=D0, suspended=True, since=0.0),
        job("l1", devices=d1, since=0.0),
    ]
    plan = policy.decide(jobs, two, now=30.0)
    top_waiting = [j.priority for j in jobs if plan.of(j.id).resident and not plan.of(j.id).running]
    lowest_running = min(j.priority for j in jobs if plan.of(j.id).running)
    assert max(top_waiting, default=-1) <= lowest_running
    assert running(plan) == {"h1", "h2"}


def test_packing_is_a_trial_kept_only_when_the_pair_gains() -> None:
    policy = Sharing()
    a = job("a", devices=D0, since=0.0, alone=0.1)
    b = job("b", devices=D0, suspended=True, since=0.0, alone=0.2)
    # Both measured alone, never packed: a trial, judged at a later boundary.
    trial = policy.decide([a, b], ONE_GPU, now=10.0)
    assert running(trial) == {"a", "b"}
    assert trial.wake_at is not None and trial.wake_at >= 10.0 + policy.trial_window_s
    # Measured packed: 0.1/0.15 + 0.2/0.3 = 1.33 > 1.05 -> kept.
    good_a = replace(a, packed={"b": Observation(0.15, 60.0, 128)})
    good_b = replace(b, suspended=False, packed={"a": Observation(0.3, 60.0, 128)})
    assert running(policy.decide([good_a, good_b], ONE_GPU, now=70.0)) == {"a", "b"}
    assert policy.verdict(good_a, good_b).keep
    # 0.1/0.3 + 0.2/0.5 = 0.73 -> reverted, and never tried again.
    bad_a = replace(a, packed={"b": Observation(0.3, 60.0, 128)})
    bad_b = replace(b, suspended=False, packed={"a": Observation(0.5, 60.0, 128)})
    assert len(running(policy.decide([bad_a, bad_b], ONE_GPU, now=70.0))) == 1
    later = replace(bad_b, suspended=True)
    assert len(running(policy.decide([bad_a, later], ONE_GPU, now=200.0))) == 1
    # A pair that does not fit in memory is not even tried.
    heavy = [replace(a, memory_gib=10.0), replace(b, memory_gib=10.0)]
    assert len(running(policy.decide(heavy, ONE_GPU, now=10.0))) == 1


def test_a_packed_pair_keeps_its_turn_until_the_next_boundary() -> None:
    """Packed beside a job that has run for quanta, the job whose turn began at the
    last boundary keeps it; the long runner is the partner, not the turn's holder
    (taken for it, every decision between boundaries handed the turn on)."""
    policy = Sharing()
    q = policy.quantum_s
    partner = job("c", devices=D0, since=0.0, alone=0.1, packed={"a": 0.15, "b": 0.15})
    turn = job("a", devices=D0, since=q + 1.0, alone=0.1, packed={"c": 0.15})
    waiting = job("b", devices=D0, suspended=True, since=q + 1.0, alone=0.1, packed={"c": 0.15})
    for now in (q + 5.0, q + 20.0, 2 * q - 1.0):
        assert running(policy.decide([partner, turn, waiting], ONE_GPU, now=now)) == {"a", "c"}
    # At the boundary the waiting job takes the turn.
    assert "b" in running(policy.decide([partner, turn, waiting], ONE_GPU, now=2 * q + 1.0))


def test_migration_spreads_crowded_gpus_and_defragments_gangs() -> None:
    policy = Sharing(packing=False)
    two = ClusterView.uniform(1, 2)
    jobs = [job("a", devices=D0, since=0.0), job("b", devices=D0, suspended=True, since=0.0)]
    plan = policy.decide(jobs, two, now=30.0)
    assert running(plan) == {"a", "b"}
    assert plan.of("b").devices == (Device("node0", 1),)
    # A 2-GPU gang split over two nodes moves onto the node that fits it.
    cluster = ClusterView.uniform(3, 2)
    split = (Device("node0", 0), Device("node1", 0))
    blocker = job("x", devices=(Device("node0", 1),), since=0.0)
    blocker2 = job("y", devices=(Device("node1", 1),), since=0.0)
    gang = job("g", gpus=2, devices=split, since=0.0)
    plan = policy.decide([blocker, blocker2, gang], cluster, now=30.0)
    assert {d.node for d in plan.of("g").devices} == {"node2"}
    assert NO_SHARING.decide([blocker, blocker2, gang], cluster, 30.0).of("g").devices == split


def test_grow_when_idle_and_shrink_when_someone_waits() -> None:
    policy = Sharing(packing=False)
    cluster = ClusterView.uniform(1, 4)
    e = job("e", devices=D0, since=0.0, elastic=True, max_gpus=4)
    grown = policy.decide([e], cluster, now=0.0)
    assert len(grown.of("e").devices) == 2
    big = replace(e, devices=tuple(Device("node0", i) for i in range(4)), workers=4)
    newcomer = job("n", gpus=4, at=10.0)
    plan = policy.decide([big, newcomer], cluster, now=20.0)
    assert len(plan.of("e").devices) == 1
    assert not any(set(plan.of("e").devices) & set(plan.of("n").devices))


def test_baseline_backfills_small_jobs_past_a_big_one() -> None:
    cluster = ClusterView.uniform(1, 4)
    jobs = [
        job("run", gpus=2, devices=(Device("node0", 0), Device("node0", 1)), since=0.0),
        job("big", gpus=4, at=1.0),
        job("small", gpus=1, at=2.0),
    ]
    plan = NO_SHARING.decide(jobs, cluster, now=3.0)
    assert running(plan) == {"run", "small"}


# -- the simulator ----------------------------------------------------------------


class Pairs:
    """A contention model for tests: fixed packed speed per pair, no spread penalty."""

    def __init__(self, speeds: dict[tuple[str, str], float]) -> None:
        self.speeds = speeds

    def packed(self, kind: str, other: str) -> float:
        return self.speeds[(kind, other)]

    def spread(self, kind: str, gpus: int, extra_nodes: int) -> float:
        return 1.0


def sim_job(name: str, hours: float, kind: str | None = None, at: float = 0.0) -> SimJob:
    return SimJob(
        id=name,
        submitted_at=at,
        profile=RESNET110_K40,
        max_gpus=1,
        requested_gpus=1,
        elastic=False,
        work_scale=hours * 3600 / RESNET110_K40.seconds_alone(1),
        kind=kind,
        minibatches=round(hours * 3600 / 0.5),
    )


def test_time_sliced_jobs_all_progress_and_lose_little_throughput() -> None:
    jobs = [sim_job(n, 0.5) for n in "abc"]
    result = Simulator(Sharing(packing=False), ONE_GPU, jobs, round_s=None).run()
    finished = {r.id: r.finished_at for r in result.records}
    assert len(finished) == 3
    back_to_back = 3 * 0.5 * 3600
    makespan = max(f for f in finished.values() if f is not None)
    assert back_to_back / makespan >= 0.99
    # Every job got its first 100 minibatches within a few quanta, not after the others.
    assert all(p.first_at is not None and p.first_at < 300 for p in result.progress)
    base = Simulator(NO_SHARING, ONE_GPU, jobs, round_s=None).run()
    last = max(base.progress, key=lambda p: p.id)
    assert last.first_at is not None and last.first_at > 3600


@pytest.mark.parametrize(("speed", "packed"), [(0.8, True), (0.3, False)])
def test_introspection_keeps_good_packings_and_reverts_bad_ones(speed: float, packed: bool) -> None:
    jobs = [sim_job("a", 2.0, "k"), sim_job("b", 2.0, "k")]
    model = Pairs({("k", "k"): speed})
    policy = Sharing()
    seen: list[tuple[float, int]] = []

    class Watch:
        name = "watch"
        needs = policy.needs

        def decide(self, views: list[JobView], cluster: ClusterView, now: float) -> Plan:
            plan = policy.decide(views, cluster, now)
            seen.append((now, len(running(plan))))
            return plan

    Simulator(Watch(), ONE_GPU, jobs, round_s=None, contention=model, until=3600.0).run()
    started = next(t for t, n in seen if n == 2)  # the trial
    after = [n for t, n in seen if t >= started + 2 * policy.quantum_s]
    assert after and all(n == (2 if packed else 1) for n in after)


# -- scenarios ------------------------------------------------------------------


@pytest.mark.slow
def test_gandiva_cluster_beats_no_sharing_on_a_small_run() -> None:
    from ringleader.scenarios.gandiva import ClusterSetup, run_cluster

    setup = ClusterSetup(hours=2.0)
    report = run_cluster(setup, 2, workers=2)
    out = report.as_json()
    ours = out["ours"]
    assert isinstance(ours, dict)
    assert ours["first100_speedup"] >= 3.0
    assert ours["throughput_gain"] >= 0.15


def test_automl_cli_writes_the_documented_json(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from ringleader.cli.app import build

    app = build()

    out = tmp_path / "automl.json"
    result = CliRunner().invoke(
        app, ["simulate", "--scenario", "automl", "--seeds", "2", "--json", str(out)]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert set(data["ours"]) == {"speedup_80", "speedup_90"}
    assert data["paper"] == {"speedup_80": 5.25, "speedup_90": 5.66}
    for name in ("baseline", "gandiva"):
        minutes = [m for m in data["minutes"][name].values() if m is not None]
        assert minutes == sorted(minutes)  # 70% before 80% before 90%
    assert math.isfinite(data["ours"]["speedup_80"])


@pytest.mark.parametrize("priorities", [(0, 5), (5, 0)])
def test_of_two_jobs_claiming_one_gpu_the_first_in_priority_then_submission_keeps_it(
    priorities: tuple[int, int],
) -> None:
    # Each says it runs on node0's GPU 0 (a body's view after a crash, say), on
    # different gangs, so they cannot share a group: the one first in the order
    # (priority, then submission) keeps the GPUs, whatever order they come in.
    both = (Device("node0", 0), Device("node0", 1))
    early = job("early", at=0.0, devices=D0, priority=priorities[0])
    late = job("late", gpus=2, at=1.0, devices=both, priority=priorities[1])
    plan = Sharing().decide([early, late], ClusterView.uniform(1, 2), 10.0)
    keeper = late if priorities[1] > priorities[0] else early
    assert plan.of(keeper.id).devices == keeper.devices and plan.of(keeper.id).running
    other = early if keeper is late else late
    assert not plan.of(other.id).running


def test_a_gang_on_gpus_that_overlap_another_gangs_of_its_size_is_placed_again() -> None:
    # Both say they run on node0's GPU 0 (a body's view after a crash, say), each with
    # another GPU: of one size, yet not a group, so the later one is placed again on the
    # GPUs free, and both run (without migration, which would move it there too).
    first = job("first", gpus=2, at=0.0, devices=(Device("node0", 0), Device("node0", 1)))
    second = job("second", gpus=2, at=1.0, devices=(Device("node0", 0), Device("node0", 2)))
    plan = Sharing(migration=False).decide([second, first], ClusterView.uniform(1, 4), 10.0)
    assert plan.of("first").devices == first.devices and plan.of("first").running
    moved = plan.of("second")
    assert moved.running and set(moved.devices).isdisjoint(first.devices)


def test_a_plan_is_settled_only_while_no_group_takes_turns() -> None:
    # Settled: nothing the plan weighs moves with the clock, so the simulator may skip a
    # quiet round tick after it (``Plan.settled``). A group taking turns reads the clock.
    policy = Sharing(packing=False)
    alone = policy.decide([job("a", devices=D0)], ONE_GPU, 100.0)
    assert alone.settled and alone.wake_at is None
    queued = policy.decide([job("a", devices=D0), job("b", at=1.0)], ONE_GPU, 100.0)
    a, b = queued.of("a"), queued.of("b")
    assert a.devices == b.devices == D0 and a.suspended != b.suspended  # taking turns
    assert not queued.settled and queued.wake_at is not None


def test_a_packed_step_time_that_is_not_a_positive_finite_number_counts_as_no_progress() -> None:
    # ``packing._ratio`` tests finiteness by comparisons, not ``math.isfinite``.
    from ringleader.policy.share.packing import _ratio

    for packed in (math.inf, -math.inf, math.nan, 0.0, -1.0, 2.0, 1e-300, 1e300):
        want = 0.0 if not math.isfinite(packed) or packed <= 0 else 3.0 / packed
        assert _ratio(3.0, packed) == want, packed
