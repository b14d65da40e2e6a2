"""Why jobs wait, or have the GPUs they have (``ringleader.spine.reasons``): read from
real policies' plans, and checked against the policies' own numbers."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from ringleader.policy.catalog import policy_named
from ringleader.policy.gandiva.sharing import Sharing
from ringleader.policy.model import plan as sizes
from ringleader.policy.model.objective import Candidate
from ringleader.policy.model.plan import Assignment, Plan
from ringleader.policy.model.views import ClusterView, Device, JobView, Node
from ringleader.policy.pipeline import Policy
from ringleader.policy.size.allocators import Doubling, OptimusGreedy
from ringleader.policy.size.payback import MARGIN
from ringleader.runtime.control.config import ControllerConfig
from ringleader.runtime.control.controller import Controller
from ringleader.runtime.state.spec import parse_spec
from ringleader.runtime.state.store import Store
from ringleader.runtime.workers.executor.local import LocalExecutor
from ringleader.spine import reasons
from tests.helpers import resnet_job
from tests.helpers import sized_job as job

CLUSTER = ClusterView((Node("n0", 4),))


def test_a_job_that_does_not_fit_names_who_holds_the_gpus() -> None:
    views = [job("big", 3), job("other", 1, at=1), job("late", 2, at=2)]
    owner = {"big": "alice", "other": "bob", "late": "carol"}
    plan = policy_named("fifo").decide(views, CLUSTER, 0.0)
    why = reasons.explain(plan, views, owner, 4, {})
    assert why["late"].code == reasons.NO_FREE_GPUS
    assert "needs 2 GPU(s), 0 free; held by big (alice, 3), other (bob, 1)" in why["late"].text
    # Running: each says why it has its size; fifo's is fixed, the request.
    assert why["big"].code == why["other"].code == reasons.FIXED_SIZE
    assert why["big"].text == (
        "runs on 3 GPU(s): the job is not elastic, so it runs at its requested size"
    )


def test_free_gpus_kept_for_the_head_of_the_queue_say_so() -> None:
    views = [job("head", 3, at=0), job("small", 1, at=1)]
    running = Assignment((Device("n0", 0), Device("n0", 1)), 2)
    plan = Plan({"head": Assignment(), "small": Assignment(), "x": running})
    views.append(job("x", 2, at=-1))
    why = reasons.explain(plan, views, {"head": "a", "small": "b", "x": "c"}, 4, {})
    assert why["head"].code == reasons.NO_FREE_GPUS  # needs 3, 2 free
    assert why["small"].code == reasons.IN_ORDER
    assert "1 job(s) submitted earlier also wait" in why["small"].text


def test_time_sliced_quota_and_smaller_than_asked() -> None:
    out = Assignment((Device("n0", 0),), 1, suspended=True)
    small = Assignment((Device("n0", 1),), 1)
    views = [job("sliced"), job("elastic", elastic=True), job("capped")]
    plan = Plan({"sliced": out, "elastic": small})
    owner = dict.fromkeys(("sliced", "elastic", "capped"), "u")
    why = reasons.explain(plan, views, owner, 2, {"capped": "over quota: ..."})
    assert why["sliced"].code == reasons.TIME_SLICE
    assert why["capped"] == reasons.Reason(reasons.QUOTA, "over quota: ...")
    assert why["elastic"].code == reasons.SMALLER and "no more are free" in why["elastic"].text


# -- time-slicing: when the next turn comes ----------------------------------------

ONE_GPU = ClusterView((Node("n0", 1),))
GPU = (Device("n0", 0),)


def _slicing(quantum_s: float = 60.0) -> Sharing:
    return Sharing("time-slicing", packing=False, quantum_s=quantum_s)


def test_two_jobs_on_one_gpu_the_waiting_one_knows_its_turn() -> None:
    # a has run since t=0; b arrived at t=10 and waits in a's group. Quanta are
    # 60 s on the clock, so a keeps the GPU to t=60: b's turn is 50 s away.
    a = job("a", 1, at=0.0, devices=GPU, workers=1, state_since=0.0)
    b = job("b", 1, at=10.0, state_since=10.0)
    plan = _slicing().decide([a, b], ONE_GPU, 10.0)
    assert plan.of("a").running and plan.of("b").suspended
    assert plan.turns["b"] == sizes.Turn(60.0, 1, 60.0)
    why = reasons.explain(plan, [a, b], {"a": "u", "b": "u"}, 1, {}, now=10.0)["b"]
    assert why.code == reasons.TIME_SLICE
    assert (why.turn_at, why.turn_in_s) == (60.0, 50.0)
    assert why.text == (
        "time-sliced out: keeps its place on 1 GPU(s); next turn in ~50 s "
        "(1 job(s) take a turn before it, 60 s quanta)"
    )
    # A holder that started only 20 s before a boundary keeps the next quantum too.
    a = replace(a, state_since=50.0)
    b = replace(b, devices=GPU, workers=1, suspended=True)
    assert _slicing().decide([a, b], ONE_GPU, 55.0).turns["b"].at == 120.0


def _step(views: list[JobView], plan: Plan, t: float) -> list[JobView]:
    """Carry ``plan`` out at ``t`` the way a body does (state_since when running flips)."""
    out = []
    for v in views:
        a = plan.of(v.id)
        since = t if a.running != (v.workers > 0 and not v.suspended) else v.state_since
        out.append(
            replace(
                v, devices=a.devices, workers=a.workers, suspended=a.suspended, state_since=since
            )
        )
    return out


@pytest.mark.parametrize(("quantum_s", "t"), [(60.0, 50.0), (37.0, 11.0), (60.0, 11.0)])
def test_the_expected_turns_are_the_turns_the_policy_then_gives(quantum_s: float, t: float) -> None:
    # Four jobs in one group, arriving at odd times: every turn predicted at any
    # decision is when later decisions (at the plan's wake-ups) run the job.
    # From t=50 the first runs to 120, not 60: it had under half a quantum by then.
    views = [job(f"j{i}", 1, at=3.0 * i, state_since=3.0 * i) for i in range(4)]
    policy = _slicing(quantum_s)
    predicted: list[tuple[float, str, float]] = []
    ran: dict[str, list[float]] = {}
    for _ in range(12):
        plan = policy.decide(views, ONE_GPU, t)
        predicted += [(t, k, turn.at) for k, turn in plan.turns.items()]
        for v in views:
            if plan.of(v.id).running:
                ran.setdefault(v.id, []).append(t)
        views = _step(views, plan, t)
        assert plan.wake_at is not None
        t = plan.wake_at
    checked = 0
    for made, k, at in predicted:
        later = [r for r in ran.get(k, []) if r > made]
        if at <= t - quantum_s:  # inside the run: the job must start exactly then
            assert later and later[0] == at, (made, k, at, ran)
            checked += 1
    assert checked >= 12


def test_a_job_below_its_groups_top_priority_has_no_turn_to_promise() -> None:
    a = job("a", 1, devices=GPU, workers=1, priority=5)
    low = job("low", 1, at=1.0)
    plan = _slicing().decide([a, low], ONE_GPU, 5.0)
    assert plan.of("low").suspended and "low" not in plan.turns
    why = reasons.explain(plan, [a, low], {"a": "u", "low": "u"}, 1, {}, now=5.0)["low"]
    assert why.turn_at is None and "next turn in" not in why.text


# -- running jobs: the policy's own account of their size --------------------------


def _candidate(v: JobView) -> Candidate:
    assert v.speed is not None
    return Candidate(v, v.speed)


def test_a_doubled_job_names_the_marginal_gain_that_stopped_it() -> None:
    # 5 GPUs: a (all its work left) and b (a tenth) get 1 each; a doubles twice
    # (1→2→4), which beats b's 1→2 per GPU, and no GPU is left.
    a, b = resnet_job("a", remaining=1.0), resnet_job("b", at=1.0, remaining=0.1)
    plan = Policy("p", Doubling()).decide([a, b], ClusterView.uniform(1, 5), 0.0)
    assert (plan.of("a").workers, plan.of("b").workers) == (4, 1)
    ca, cb = _candidate(a), _candidate(b)
    step = Doubling._step
    taken = [step(ca, 1), step(ca, 2)]
    bar = min((r[1] - r[2]) / r[0] for r in taken if r is not None)
    s = plan.sizing["a"]
    assert s.stop == sizes.OUTBID and (s.workers, s.next_workers) == (4, 8)
    assert (s.before_s, s.after_s) == (ca.remaining_seconds(4), ca.remaining_seconds(8))
    assert s.gain_per_gpu == (ca.remaining_seconds(4) - ca.remaining_seconds(8)) / 4
    assert s.bar == bar and s.free == 0 and not s.per_epoch
    sb = plan.sizing["b"]
    assert sb.stop == sizes.OUTBID and sb.next_workers == 2
    assert sb.gain_per_gpu == cb.remaining_seconds(1) - cb.remaining_seconds(2)
    assert sb.gain_per_gpu is not None and sb.gain_per_gpu < bar  # why 2→4 for a won
    why = reasons.explain(plan, [a, b], {"a": "al", "b": "bo"}, 5, {})
    assert why["a"].code == why["b"].code == reasons.SIZED_BY_GAIN
    assert why["a"].sizing == s
    gain = s.gain_per_gpu
    assert gain is not None and gain < bar
    assert why["a"].text == (
        f"runs on 4 GPU(s): 8 would cut its predicted remaining time by "
        f"{(1 - s.after_s / s.before_s) * 100:.0f}% "
        f"({s.before_s:.0f} s to {s.after_s:.0f} s, {gain:.0f} s per added GPU): "
        f"below the marginal gain of every step the policy took (the least, {bar:.0f} s "
        "per GPU); the other GPUs are held by b (bo, 1)"
    )
    assert why["b"].text.endswith("; the other GPUs are held by a (al, 4)")


def test_a_step_that_does_not_help_is_named_with_both_predictions() -> None:
    # Optimus adds one GPU at a time and stops where one more would not help.
    a = resnet_job("a", max_gpus=64)
    plan = Policy("p", OptimusGreedy()).decide([a], ClusterView.uniform(8, 8), 0.0)
    w = plan.of("a").workers
    ca = _candidate(a)
    assert 1 < w < 64 and ca.remaining_seconds(w + 1) >= ca.remaining_seconds(w)
    assert plan.sizing["a"] == sizes.Sizing(
        sizes.NO_GAIN, w, w + 1, ca.remaining_seconds(w), ca.remaining_seconds(w + 1)
    )
    why = reasons.explain(plan, [a], {"a": "u"}, 64, {})["a"]
    assert why.text == (
        f"runs on {w} GPU(s): {w + 1} would not cut its predicted remaining time "
        f"({ca.remaining_seconds(w):.0f} s at {w}, {ca.remaining_seconds(w + 1):.0f} s at "
        f"{w + 1}): no marginal gain"
    )


def test_a_job_at_its_max_gpus_says_so() -> None:
    a, b = resnet_job("a", max_gpus=2), resnet_job("b", at=1.0, max_gpus=8)
    plan = Policy("p", Doubling()).decide([a, b], ClusterView.uniform(1, 16), 0.0)
    assert plan.of("a").workers == 2
    assert plan.sizing["a"] == sizes.Sizing(sizes.AT_MAX, 2, limit=2)
    why = reasons.explain(plan, [a, b], {"a": "u", "b": "u"}, 16, {})
    assert why["a"] == reasons.Reason(
        reasons.SIZED_BY_GAIN, "runs on 2 GPU(s): at its max_gpus (2)", sizing=plan.sizing["a"]
    )
    assert why["b"].text == "runs on 8 GPU(s): at its max_gpus (8)"
    # On 8 GPUs b reaches 4, and doubling again needs 4 with 2 left.
    plan = Policy("p", Doubling()).decide([a, b], ClusterView.uniform(1, 8), 0.0)
    assert (plan.of("b").workers, plan.sizing["b"].free) == (4, 2)
    why = reasons.explain(plan, [a, b], {"a": "u", "b": "u"}, 8, {})
    assert why["b"].text.endswith(", but needs 4 more GPU(s) and 2 were left")


def test_a_grow_whose_restart_would_not_be_won_back_says_so() -> None:
    on = (Device("node0", 0), Device("node0", 1))
    a = resnet_job("a", max_gpus=16, workers=2, devices=on, restart_s=3000.0)
    plan = Policy("p", Doubling()).decide([a], ClusterView.uniform(2, 8), 0.0)
    ca = _candidate(a)
    saved = ca.remaining_seconds(2) - ca.remaining_seconds(4)
    assert 0 < saved < MARGIN * 3000.0
    s = plan.sizing["a"]
    assert (s.stop, s.workers, s.next_workers, s.saved_s) == (
        sizes.RESTART_NOT_WON,
        2,
        4,
        saved,
    )
    text = reasons.explain(plan, [a], {"a": "u"}, 16, {})["a"].text
    assert f"what the resize saves ({saved:.0f} s of its remaining time) is less than 2×" in text
    assert text.endswith("the 3000 s restart it costs")


@pytest.mark.parametrize("name", ["fifo", "tiresias", "gandiva", "no-sharing", "two"])
def test_policies_of_fixed_sizes_say_the_size_is_fixed(name: str) -> None:
    views = [job("x", 2, elastic=True, min_gpus=2)]
    plan = policy_named(name).decide(views, ClusterView.uniform(1, 2), 0.0)
    why = reasons.explain(plan, views, {"x": "u"}, 2, {})["x"]
    assert why.code == reasons.FIXED_SIZE
    assert why.text == (
        "runs on 2 GPU(s): the policy gives each job a fixed size, its requested gpus; "
        "no growth weighed"
    )


def test_a_gandiva_job_grown_onto_idle_gpus_says_it_shrinks_back() -> None:
    views = [job("x", 1, elastic=True)]
    plan = policy_named("gandiva").decide(views, ClusterView.uniform(1, 2), 0.0)
    why = reasons.explain(plan, views, {"x": "u"}, 2, {})["x"]
    assert plan.of("x").workers == 2 and why.code == reasons.GROWN_IDLE


def test_the_controller_keeps_running_jobs_reasons_and_counts_turns_from_now(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "ringleader.db")
    executor = LocalExecutor(1, warm=False)
    try:
        config = ControllerConfig(tmp_path, _slicing(), round_s=1.0)
        controller = Controller(store, executor, config)
        first = store.add(parse_spec({"name": "a", "command": ["true"]}), now=990.0)
        second = store.add(parse_spec({"name": "b", "command": ["true"]}), now=995.0)
        controller._decide(1000.0)
        # a is to run from t=1000: it keeps the GPU past 1020 to the boundary at 1080.
        assert controller.reasons[first.id].code == reasons.FIXED_SIZE
        sliced = controller.reasons[second.id]
        assert sliced.code == reasons.TIME_SLICE
        assert (sliced.turn_at, sliced.turn_in_s) == (1080.0, 80.0)
        assert "next turn in ~80 s" in sliced.text
    finally:
        executor.warm.close()
        store.close()


def test_a_probe_and_an_unmeasured_job_say_the_policy_has_not_sized_them_yet() -> None:
    probing = [replace(resnet_job("a"), speed=None)]
    plan = policy_named("exploratory").decide(probing, ClusterView.uniform(1, 8), 0.0)
    why = reasons.explain(plan, probing, {"a": "u"}, 8, {})["a"]
    assert why.code == reasons.PROFILING
    assert plan.sizing["a"] == sizes.Sizing(sizes.PROBING, 1, held=8)
    assert "holding 8 for its larger probes" in why.text
    # Online: a job that has reported nothing grows only to its start size (gpus=2).
    fresh = [job("e", 2, elastic=True, min_gpus=1, max_gpus=8)]
    plan = policy_named("elastic").decide(fresh, ClusterView.uniform(1, 8), 0.0)
    s = plan.sizing["e"]
    assert (s.stop, s.workers, s.next_workers, s.measured) == (sizes.UNMEASURED, 2, 4, False)
    assert reasons.explain(plan, fresh, {"e": "u"}, 8, {})["e"].text == (
        "runs on 2 GPU(s): not measured yet, so it grows no further than its start size (2) "
        "until it reports"
    )
