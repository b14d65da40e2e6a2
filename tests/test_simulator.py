import dataclasses
import gc
from collections.abc import Sequence

import pytest

from ringleader.policy import ClusterView, policy_named
from ringleader.policy.model.needs import Needs
from ringleader.policy.model.plan import Decider, Plan
from ringleader.policy.model.views import JobView
from ringleader.scenarios import table3
from ringleader.sim import RESNET110_K40, SharedCores, SimJob, SimulationStalled, Simulator
from ringleader.sim.arrivals import poisson_arrivals

DELAY = 3.8
P = RESNET110_K40


def _run(policy: str, jobs: list[SimJob], nodes: int = 1, **kw: object):  # type: ignore[no-untyped-def]
    return Simulator(policy_named(policy), ClusterView.uniform(nodes, 8), jobs, **kw).run()  # type: ignore[arg-type]


def test_a_lone_job_takes_its_solo_time_plus_one_launch() -> None:
    result = _run("eight", [SimJob("a", 100.0, P)])
    (record,) = result.records
    assert record.jct == pytest.approx(DELAY + P.seconds_alone(8))
    assert record.started_at == 100.0


def test_the_calibrated_job_reproduces_the_seeds_solo_hours() -> None:
    for workers, hours in {1: 6.37, 2: 3.78, 4: 2.21, 8: 1.40}.items():
        assert P.seconds_alone(workers) / 3600 == pytest.approx(hours, rel=1e-9)


def test_exploration_of_a_lone_job_costs_what_the_seed_says() -> None:
    result = _run("exploratory", [SimJob("a", 0.0, P)])
    left = 1.0 - sum(150.0 / P.seconds_alone(w) for w in (1, 2, 4))
    expected = 4 * DELAY + 3 * 150.0 + left * P.seconds_alone(8)
    assert result.records[0].jct == pytest.approx(expected, rel=1e-9)
    assert result.records[0].resizes == 3
    # The seed: 1.47 h with exploration against 1.40 h without.
    assert expected / 3600 == pytest.approx(1.47, abs=0.01)


def test_a_resize_costs_the_restart_delay() -> None:
    # b arrives while a runs on 8: a shrinks (a restart), later grows back (another).
    jobs = [SimJob("a", 0.0, P), SimJob("b", 600.0, P)]
    slow = _run("precompute", jobs, restart_delay_s=600.0, round_s=None)
    fast = _run("precompute", jobs, restart_delay_s=0.0, round_s=None)
    a_slow, a_fast = slow.records[0], fast.records[0]
    assert a_slow.resizes >= 1
    assert a_slow.jct - a_fast.jct >= 600.0 * (1 + a_slow.resizes) - 1e-6


def test_utilisation_counts_gpus_given_to_workers_not_gpus_held_idle() -> None:
    assert _run("one", [SimJob("a", 0.0, P)]).summary.utilization == pytest.approx(1 / 8)
    # Exploration holds 8 GPUs while probing at 1, 2 and 4: held, not used.
    explored = _run("exploratory", [SimJob("a", 0.0, P)])
    assert explored.summary.utilization < 1.0
    assert max(p.held for p in explored.usage) == 8


def test_round_ticks_do_not_change_a_fixed_policy() -> None:
    jobs = [SimJob(f"j{i}", t, P) for i, t in enumerate(poisson_arrivals(30, 400, 3))]
    with_ticks = _run("four", jobs, nodes=2, round_s=60.0)
    without = _run("four", jobs, nodes=2, round_s=None)
    assert [r.jct for r in with_ticks.records] == pytest.approx([r.jct for r in without.records])
    assert with_ticks.decisions > without.decisions


class _ReadsTheClock:
    """``policy`` with none of its plans settled: asked again at every round tick."""

    def __init__(self, policy: Decider) -> None:
        self.policy = policy
        self.name = policy.name

    @property
    def needs(self) -> Needs:
        return self.policy.needs

    def decide(self, jobs: Sequence[JobView], cluster: ClusterView, now: float) -> Plan:
        return dataclasses.replace(self.policy.decide(jobs, cluster, now), settled=False)


def test_a_quiet_round_tick_after_a_settled_plan_is_skipped_and_changes_nothing() -> None:
    # Gandiva's stack with elastic jobs on shared CPU cores: a plan that places a job is
    # settled, yet the next decision grows the job onto GPUs left idle (the new job was
    # not running when it was placed), so a tick is skipped only after a plan that
    # moved nobody. Every outcome is as when each round tick is asked.
    jobs = table3.workload("moderate", 2)[:60]
    cluster = ClusterView.uniform(2, 4)
    skipping = Simulator(policy_named("gandiva"), cluster, jobs, host=SharedCores(4, (0, 1))).run()
    asking = Simulator(
        _ReadsTheClock(policy_named("gandiva")), cluster, jobs, host=SharedCores(4, (0, 1))
    ).run()
    assert skipping.decisions < asking.decisions
    assert skipping.records == asking.records
    assert skipping.counts == asking.counts
    assert skipping.usage == asking.usage
    assert skipping.shares == asking.shares
    assert skipping.progress == asking.progress


def test_same_input_same_result() -> None:
    jobs = [SimJob(f"j{i}", t, P) for i, t in enumerate(poisson_arrivals(40, 300, 11))]
    first = _run("exploratory", jobs, nodes=4)
    second = _run("exploratory", jobs, nodes=4)
    assert first.records == second.records and first.usage == second.usage


def test_every_job_finishes_and_gpus_are_never_oversubscribed() -> None:
    jobs = [SimJob(f"j{i}", t, P) for i, t in enumerate(poisson_arrivals(60, 200, 5))]
    for policy in ("precompute", "exploratory", "optimus", "two"):
        result = _run(policy, jobs, nodes=2)
        assert result.summary.finished == 60
        assert max(p.held for p in result.usage) <= 16
        assert all(p.busy <= p.held for p in result.usage)


def test_a_job_that_can_never_fit_stalls_with_a_clear_error() -> None:
    jobs = [SimJob("wide", 0.0, P, requested_gpus=16, max_gpus=16)]
    with pytest.raises(SimulationStalled, match="wide"):
        _run("fifo", jobs)


def test_work_scale_scales_the_job() -> None:
    single = _run("eight", [SimJob("a", 0.0, P)]).records[0].jct
    double = _run("eight", [SimJob("a", 0.0, P, work_scale=2.0)]).records[0].jct
    assert double - DELAY == pytest.approx(2 * (single - DELAY))


def test_time_that_cannot_advance_is_a_stall_not_an_endless_loop() -> None:
    # 1e-8 of ResNet-110 at t = 1e6 s is less work than one tick of the clock there.
    tiny = SimJob("tiny", 1e6, P, work_scale=1e-8)
    with pytest.raises(SimulationStalled, match="stopped advancing"):
        Simulator(policy_named("elastic"), ClusterView.uniform(1, 4), [tiny]).run()


def test_a_run_leaves_the_collectors_frozen_objects_as_it_found_them() -> None:
    jobs = [SimJob(f"j{i}", float(i), RESNET110_K40) for i in range(3)]

    def run() -> None:
        Simulator(policy_named("fifo"), ClusterView.uniform(1, 4), jobs).run()

    assert gc.get_freeze_count() == 0
    run()
    assert gc.get_freeze_count() == 0  # frozen for the run only
    held = [object() for _ in range(10)]  # something of the caller's, frozen by it
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        run()
        assert gc.get_freeze_count() == frozen  # not thawed by the run
    finally:
        gc.unfreeze()
    assert held


def test_what_each_decision_leaves_is_kept_from_the_collector_for_the_run_only() -> None:
    """The objects a decision leaves behind (views, plan, memos) are frozen with the
    workload, so collections between decisions walk only what the engine makes; a
    caller that froze objects itself is left to its own collector."""
    jobs = [SimJob(f"j{i}", 100.0 * i, RESNET110_K40) for i in range(4)]
    fifo = policy_named("fifo")
    seen: list[tuple[bool, bool]] = []  # the last plan: tracked, and in a generation

    class Watching:
        name = fifo.name
        needs = fifo.needs
        last: object = None

        def decide(self, views, cluster, now):  # type: ignore[no-untyped-def]
            if self.last is not None:
                young = any(
                    any(o is self.last for o in gc.get_objects(generation=g)) for g in range(3)
                )
                seen.append((gc.is_tracked(self.last), young))
            self.last = plan = fifo.decide(views, cluster, now)
            return plan

    def run() -> None:
        Simulator(Watching(), ClusterView.uniform(1, 4), jobs).run()  # type: ignore[arg-type]

    run()
    assert len(seen) > 3 and all(tracked for tracked, _ in seen)
    assert not any(young for _, young in seen)  # frozen: in no generation the collector walks
    assert gc.get_freeze_count() == 0
    seen.clear()
    gc.freeze()  # the caller's own, as a server freezes before it forks
    try:
        run()
        assert seen and all(young for _, young in seen)
    finally:
        gc.unfreeze()


def test_a_job_admitted_is_the_state_the_class_makes_field_by_field() -> None:
    # The engine admits jobs through ``arrived``, which stores each field itself; it
    # must give every field the class's own default (or ``__post_init__``'s value).
    from ringleader.sim.jobs import JobState, arrived

    for job in (
        SimJob("a", 3.0, RESNET110_K40, max_gpus=4, priority=2, work_scale=1.5),
        SimJob("b", 0.0, RESNET110_K40, user="ann", gpu_types=("v100",)),
    ):
        made, admitted = JobState(job, state_since=7.0), arrived(job, 7.0)
        for f in dataclasses.fields(JobState):
            assert getattr(admitted, f.name) == getattr(made, f.name), f.name
        # Mutable defaults are the job's own, as a default_factory makes them.
        assert admitted.observations is not arrived(job, 7.0).observations
        assert admitted.counts is not arrived(job, 7.0).counts
