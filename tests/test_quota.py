"""Per-user GPU quotas around any policy (``ringleader.spine.quota``), and on a real server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ringleader.policy.catalog import policy_named
from ringleader.policy.model.views import ClusterView, Device, JobView, Node
from ringleader.spine import quota
from tests.helpers import sized_job as job
from tests.live_server import LiveServer, run_cli, wait_for

CLUSTER = ClusterView((Node("n0", 4), Node("n1", 4)))


def used_by(plan: object, views: list[JobView], owner: dict[str, str], user: str) -> int:
    return sum(
        plan.of(v.id).workers  # type: ignore[attr-defined]
        for v in views
        if owner[v.id] == user and plan.of(v.id).running  # type: ignore[attr-defined]
    )


@pytest.mark.parametrize("policy", ["fifo", "elastic", "tiresias", "gandiva", "ringleader"])
def test_no_policy_takes_a_user_past_their_quota(policy: str) -> None:
    views = [job(f"a{i}", gpus=2, at=i) for i in range(3)] + [
        job("e", elastic=True, at=5),
        job("b0", gpus=2, at=6),
    ]
    owner = {v.id: "alice" for v in views} | {"b0": "bob"}
    quotas = {"alice": 3}
    decider = policy_named(policy)
    admitted, held = quota.admit(views, owner, quotas)
    plan = decider.decide(admitted, CLUSTER, 0.0)
    plan, trimmed = quota.trim(plan, views, owner, quotas)
    assert used_by(plan, views, owner, "alice") <= 3
    assert plan.of("b0").running  # bob has no quota: his job is not held back for alice's
    waiting = [v.id for v in views if owner[v.id] == "alice" and not plan.of(v.id).running]
    assert waiting and all("quota" in (held | trimmed)[j] for j in waiting)


def test_a_running_job_keeps_its_gpus_and_an_elastic_one_shrinks_to_fit() -> None:
    running = job("old", gpus=2, devices=(Device("n0", 0), Device("n0", 1)), workers=2)
    grow = job("grow", elastic=True, at=1)
    views = [running, grow]
    owner = {"old": "alice", "grow": "alice"}
    plan = policy_named("elastic").decide(views, CLUSTER, 0.0)
    assert plan.of("grow").workers > 1  # the policy alone would give it more
    trimmed, reasons = quota.trim(plan, views, owner, {"alice": 3})
    assert trimmed.of("old").workers == 2 and trimmed.of("grow").workers == 1
    assert "runs on 1" in reasons["grow"]


def test_without_quotas_the_plan_is_the_policys() -> None:
    views = [job("a", gpus=2), job("b", elastic=True)]
    plan = policy_named("elastic").decide(views, CLUSTER, 0.0)
    assert quota.trim(plan, views, {"a": "x", "b": "x"}, {})[0] is plan
    assert quota.admit(views, {"a": "x", "b": "x"}, {})[0] == views


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = LiveServer(tmp_path_factory.mktemp("quota"), 3, 1.0).start()
    yield live
    live.stop()
    live.kill_workers()


@pytest.mark.slow
def test_a_job_over_quota_waits_beside_free_gpus_and_says_why(server: LiveServer) -> None:
    token = run_cli(server.url, "users", "add", "erin", "--quota-gpus", "1").stdout.strip()
    erin = {"Authorization": f"Bearer {token}"}
    first = server.http.post(
        "/jobs", json={"name": "q1", "command": ["sleep", "60"]}, headers=erin
    ).json()["id"]
    server.wait_state(first, {"running"}, 60)
    second = server.http.post(
        "/jobs", json={"name": "q2", "command": ["sleep", "60"]}, headers=erin
    ).json()["id"]
    wait_for(lambda: bool(server.job(second).get("reason")), 30, "a reason for q2")
    shown = server.job(second)
    assert shown["state"] == "queued" and "over quota" in shown["reason"]
    assert server.cluster()["gpus"] - 1 >= 1  # GPUs were free all along
    out = run_cli(server.url, "show", second)
    assert "over quota" in out.stdout
    server.cancel(first)
    server.wait_state(second, {"running"}, 60)
    # Running now, it says why it has its size, and no longer that it is over quota.
    wait_for(lambda: server.job(second)["reason_code"] == "fixed_size", 30, "q2's size reason")
    assert "over quota" not in server.job(second)["reason"]
    server.cancel(second)


def test_a_job_that_can_never_fit_its_owners_quota_is_refused_naming_the_field(
    server: LiveServer,
) -> None:
    token = run_cli(server.url, "users", "add", "fay", "--quota-gpus", "2").stdout.strip()
    fay = {"Authorization": f"Bearer {token}"}
    rigid = server.http.post(
        "/jobs", json={"name": "big", "command": ["sleep", "1"], "gpus": 3}, headers=fay
    )
    assert rigid.status_code == 422
    (problem,) = rigid.json()["detail"]
    assert problem["field"] == "gpus" and "user 'fay' may hold 2 at once" in problem["reason"]
    elastic = {"name": "e", "command": ["sleep", "1"], "elastic": True, "min_gpus": 3, "gpus": 3}
    refused = server.http.post("/jobs", json=elastic, headers=fay)
    assert refused.status_code == 422 and refused.json()["detail"][0]["field"] == "min_gpus"
    # One that fits at its smallest size is taken, and grows no further than the quota.
    shrinks = {**elastic, "min_gpus": 1}
    assert server.http.post("/jobs", json=shrinks, headers=fay).status_code == 201
