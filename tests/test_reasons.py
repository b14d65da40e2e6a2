"""Why jobs wait (``ringleader.spine.reasons``): read from real policies' plans."""

from __future__ import annotations

from ringleader.policy.catalog import policy_named
from ringleader.policy.plan import Assignment, Plan
from ringleader.policy.views import ClusterView, Device, Node
from ringleader.spine import reasons
from tests.helpers import sized_job as job

CLUSTER = ClusterView((Node("n0", 4),))


def test_a_job_that_does_not_fit_names_who_holds_the_gpus() -> None:
    views = [job("big", 3), job("other", 1, at=1), job("late", 2, at=2)]
    owner = {"big": "alice", "other": "bob", "late": "carol"}
    plan = policy_named("fifo").decide(views, CLUSTER, 0.0)
    why = reasons.explain(plan, views, owner, 4, {})
    assert why["late"].code == reasons.NO_FREE_GPUS
    assert "needs 2 GPU(s), 0 free; held by big (alice, 3), other (bob, 1)" in why["late"].text
    assert "big" not in why and "other" not in why  # running at their size: nothing to say


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
