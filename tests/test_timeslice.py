"""The share stage: the default policy time-slices long jobs when GPUs are short."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ringleader.perf.epochs import EpochsToConverge
from ringleader.policy.catalog import (
    LONG_JOB_QUANTUM_S,
    QUEUE_THRESHOLDS_GPU_S,
    policy_from_config,
)
from ringleader.policy.model.plan import Plan
from ringleader.policy.model.views import ClusterView, Device, JobShape, JobView, Observation
from ringleader.policy.pipeline import Policy
from ringleader.policy.share.timeslice import TimeSlice, _since_before, _waited_longer
from ringleader.sim.engine import Simulator
from ringleader.sim.profiles import RESNET110_K40
from ringleader.sim.submitted import SimJob
from tests.helpers import default_policy as default

SHAPE = JobShape(50_000, 128, 1e7)
D0, D1 = Device("node0", 0), Device("node0", 1)
LAST_QUEUE = QUEUE_THRESHOLDS_GPU_S[-1]
LONG = LAST_QUEUE + 3600.0
Q = LONG_JOB_QUANTUM_S


def job(
    name: str,
    *,
    at: float = 0.0,
    devices: tuple[Device, ...] = (),
    suspended: bool = False,
    since: float = 0.0,
    attained: float = LONG,
) -> JobView:
    return JobView(
        id=name,
        submitted_at=at,
        shape=SHAPE,
        epochs=EpochsToConverge.constant(10),
        requested_gpus=1,
        min_gpus=1,
        max_gpus=1,
        elastic=False,
        devices=devices,
        workers=len(devices),
        suspended=suspended,
        state_since=since,
        attained_gpu_s=attained,
    )


def decide(jobs: list[JobView], now: float, gpus: int = 1) -> Plan:
    return default().decide(jobs, ClusterView.uniform(1, gpus), now)


def test_the_default_time_slices_and_says_so() -> None:
    policy = default()
    assert isinstance(policy.share, TimeSlice)
    assert policy.needs.time_slicing
    assert replace(policy, share=None).needs.time_slicing is False


def test_a_long_job_waiting_for_a_full_cluster_takes_turns_with_a_long_one_running() -> None:
    now = 100 * Q + 10.0
    # a started just after the last boundary: it keeps the GPU to the next one.
    plan = decide([job("a", devices=(D0,), since=now - 100), job("b", at=1.0)], now)
    assert plan.of("a").running and plan.of("a").devices == (D0,)
    assert plan.of("b").suspended and plan.of("b").devices == (D0,)
    assert plan.wake_at == 101 * Q  # the next quantum boundary
    assert plan.turns["b"].at == 101 * Q and plan.turns["b"].ahead == 1

    # At that boundary a has had its half quantum: b runs, a is suspended in place.
    later = 101 * Q
    swapped = decide(
        [
            job("a", devices=(D0,), since=now - 100),
            job("b", at=1.0, devices=(D0,), suspended=True, since=now),
        ],
        later,
    )
    assert swapped.of("b").running and swapped.of("a").suspended
    assert swapped.of("a").devices == (D0,)


def test_a_job_that_has_not_reached_the_last_queue_is_not_time_sliced() -> None:
    now = 100 * Q + 10.0
    short = 0.5 * LAST_QUEUE
    plan = decide(
        [
            job("a", devices=(D0,), since=now - 100, attained=short),
            job("b", at=1.0, attained=short),
        ],
        now,
    )
    assert plan.of("a").running
    assert not plan.of("b").resident  # it waits its turn in the least-attained queue
    assert plan.turns == {}


def test_a_newcomer_below_the_threshold_takes_the_gpu_and_the_group_dissolves() -> None:
    now = 100 * Q + 10.0
    jobs = [
        job("a", devices=(D0,), since=now - 5000),
        job("b", at=1.0, devices=(D0,), suspended=True, since=now - 5000),
        job("c", at=now - 1, attained=0.0),
    ]
    plan = decide(jobs, now)
    assert plan.of("c").running and plan.of("c").devices == (D0,)
    assert not plan.of("a").resident and not plan.of("b").resident


def test_a_suspended_resident_moves_to_a_gpu_that_came_free_and_the_running_one_stays() -> None:
    now = 100 * Q + 10.0
    jobs = [
        job("a", at=5.0, devices=(D0,), since=now - 5000),
        job("b", at=1.0, devices=(D0,), suspended=True, since=now - 5000),
    ]
    plan = decide(jobs, now, gpus=2)
    assert plan.of("a").running and plan.of("a").devices == (D0,)  # no move for the runner
    assert plan.of("b").running and plan.of("b").devices == (D1,)


def test_a_group_holds_at_most_max_residents() -> None:
    now = 100 * Q + 10.0
    jobs = [job("a", devices=(D0,), since=now - 5000)] + [
        job(f"w{i}", at=1.0 + i) for i in range(5)
    ]
    plan = decide(jobs, now)
    resident = [j.id for j in jobs if plan.of(j.id).resident]
    assert len(resident) == TimeSlice().max_residents
    assert resident == ["a", "w0", "w1", "w2"]  # admitted in the order stage's order


def test_the_quantum_and_the_threshold_are_settable() -> None:
    policy = policy_from_config("ringleader", quantum_s=120.0, thresholds_gpu_s=(3600.0, 7200.0))
    assert isinstance(policy, Policy) and isinstance(policy.share, TimeSlice)
    assert policy.share.quantum_s == 120.0
    assert policy.share.after_gpu_s == 7200.0  # the last queue takes turns
    assert isinstance(default().share, TimeSlice)
    assert default().share.after_gpu_s == LAST_QUEUE  # type: ignore[union-attr]


def _sim_job(name: str, at_h: float, hours: float) -> SimJob:
    scale = hours * 3600.0 / RESNET110_K40.seconds_alone(1)
    return SimJob(
        name,
        at_h * 3600.0,
        RESNET110_K40,
        max_gpus=1,
        requested_gpus=1,
        elastic=False,
        work_scale=scale,
    )


def test_in_the_simulator_a_long_job_no_longer_waits_for_a_much_longer_one_to_end() -> None:
    # One GPU: a 300-hour job, then a 120-hour one that arrives when the first is in
    # the last queue. Once both are there, without turns the 120-hour job waits for
    # the 300-hour one to end.
    jobs = [_sim_job("huge", 0.0, 300.0), _sim_job("long", 101.0, 120.0)]
    cluster = ClusterView.uniform(1, 1)
    jct = {}
    for label, policy in (("turns", default()), ("fifo-queue", replace(default(), share=None))):
        result = Simulator(policy, cluster, jobs).run()
        jct[label] = {r.id: r.jct for r in result.records}
        if label == "turns":
            assert result.counts.get("suspend", 0) > 0
    assert jct["fifo-queue"]["long"] > 300 * 3600.0
    assert jct["turns"]["long"] < 0.6 * jct["fifo-queue"]["long"]
    # The 300-hour job pays for it, but not past the two jobs' total work.
    assert jct["turns"]["huge"] <= 421 * 3600.0


def test_on_mixed_types_the_queue_that_takes_turns_counts_service_like_the_order() -> None:
    from ringleader.policy.catalog import with_types

    aware, agnostic = with_types(default(), True), with_types(default(), False)
    assert isinstance(aware, Policy) and isinstance(agnostic, Policy)
    assert isinstance(aware.share, TimeSlice) and aware.share.effective
    assert isinstance(agnostic.share, TimeSlice) and not agnostic.share.effective
    # b held 101 GPU-hours, 50.5 of them in its best type's terms: counted that way it
    # is not in the last queue, so it goes ahead of a rather than taking turns with it.
    slow = replace(job("b", at=1.0), attained_effective_s=0.5 * LONG)
    now = 100 * Q + 10.0
    running = job("a", devices=(D0,), since=now - 100)
    cluster = ClusterView.uniform(1, 1)
    typed = aware.decide([running, slow], cluster, now)
    assert typed.of("b").running and not typed.of("a").resident
    blind = agnostic.decide([running, slow], cluster, now)
    assert blind.of("a").running and blind.of("b").suspended


def _measured(
    name: str, *, packed_with: dict[str, tuple[float, float]] | None = None, **kw: Any
) -> JobView:
    """A long job measured alone at 1 s a minibatch; ``packed_with``: per partner, its
    (minibatch time, seconds) packed."""
    packed = {o: Observation(t, s, 128) for o, (t, s) in (packed_with or {}).items()}
    return replace(job(name, **kw), observations={1: Observation(1.0, 600.0, 128)}, packed=packed)


def test_two_measured_long_jobs_on_one_gpu_are_packed_on_trial() -> None:
    now = 100 * Q + 10.0
    policy = default()
    assert policy.needs.packing and isinstance(policy.share, TimeSlice)
    assert policy.share.packing is not None
    window = policy.share.packing.trial_window_s
    a = _measured("a", devices=(D0,), since=now - 100)
    b = _measured("b", at=1.0, devices=(D0,), suspended=True, since=now - 100)
    trial = decide([a, b], now)
    assert trial.of("a").running and trial.of("b").running  # packed: both on D0
    assert trial.of("b").devices == (D0,)
    # Judged at the first decision after the window: the next quantum boundary at
    # the latest, when the groups turn over anyway.
    assert window < Q and trial.wake_at == 101 * Q
    # Unmeasured alone, a pair has nothing to be judged against: turns only.
    plain = decide([job("a", devices=(D0,), since=now - 100), job("b", at=1.0)], now)
    assert plain.of("b").suspended


def test_a_pair_is_kept_only_where_it_beat_taking_turns_and_never_retried_otherwise() -> None:
    now = 100 * Q + 10.0
    window = 45.0

    def pair(step_s: float) -> Plan:
        return decide(
            [
                _measured("a", devices=(D0,), since=now - 100, packed_with={"b": (step_s, window)}),
                _measured(
                    "b", at=1.0, devices=(D0,), since=now - 100, packed_with={"a": (step_s, window)}
                ),
            ],
            now,
        )

    kept = pair(1.5)  # each at 1/1.5 of its speed alone: 1.33 together, over turns' 1.0
    assert kept.of("a").running and kept.of("b").running
    assert kept.wake_at == 101 * Q  # judged: no trial to wait for
    reverted = pair(2.5)  # 0.8 together: worse than turns
    assert [reverted.of(j).running for j in ("a", "b")].count(True) == 1
    assert [reverted.of(j).suspended for j in ("a", "b")].count(True) == 1


class PackEveryone:
    """A user-written share stage that says it packs: it changes nothing here, but a
    body must then profile jobs per partner."""

    packs = True

    def share(self, assignments, ordered, cluster, now):  # type: ignore[no-untyped-def]
        return TimeSlice().share(assignments, ordered, cluster, now)


def test_a_share_stage_says_itself_whether_it_packs() -> None:
    base = default()
    assert replace(base, share=TimeSlice(packing=None)).needs.packing is False
    assert replace(base, share=None).needs.packing is False
    custom = replace(base, share=PackEveryone())
    assert custom.needs.packing and custom.needs.time_slicing


def test_who_waited_longer_is_compared_as_the_key_tuples_compare() -> None:
    held = (Device("n0", 0),)
    views = [
        job(name, devices=devices, since=since)
        for name in ("a", "b")
        for devices in ((), held)
        for since in (0.0, 5.0)
    ]
    for a in views:
        for b in views:
            key_a = (a.workers > 0, a.state_since, a.id)
            key_b = (b.workers > 0, b.state_since, b.id)
            assert _waited_longer(a, b) == (key_a < key_b)
            assert _since_before(a, b) == ((a.state_since, a.id) < (b.state_since, b.id))
