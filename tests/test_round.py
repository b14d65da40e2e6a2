"""One round for both bodies (``spine.round``): quotas and reasons in the simulator as
in the server, and a workload file's users with their quotas."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from ringleader.policy.catalog import policy_named
from ringleader.policy.model.views import ClusterView
from ringleader.runtime.control.config import ControllerConfig
from ringleader.runtime.control.controller import Controller
from ringleader.runtime.state.spec import parse_spec
from ringleader.runtime.state.store import Store
from ringleader.runtime.state.users import Users
from ringleader.runtime.workers.executor.local import LocalExecutor
from ringleader.sim.engine import Simulator
from ringleader.sim.profiles import RESNET110_K40
from ringleader.sim.submitted import SimJob
from ringleader.sim.workload_file import load_workload
from ringleader.sim.workload_spec import WorkloadFileError
from ringleader.spine import reasons
from ringleader.spine.round import decide_round
from tests.helpers import sized_job

ROOT = Path(__file__).parents[1]

# alice may use 5 GPUs: a0 and a1 (2 each) fit, a2 (2 more) does not, a3 (1) does;
# bob has no quota, and b0 (4) waits for GPUs, not for a quota.
JOBS = [("a0", "alice", 2), ("a1", "alice", 2), ("a2", "alice", 2), ("a3", "alice", 1)]
JOBS += [("b0", "bob", 4)]
QUOTAS = {"alice": 5}


def _sim_waits(cluster: ClusterView, until: float) -> dict[str, dict[str, float]]:
    jobs = [
        SimJob(name, float(i), RESNET110_K40, max_gpus=gpus, min_gpus=gpus, requested_gpus=gpus,
               elastic=False, user=user)
        for i, (name, user, gpus) in enumerate(JOBS)
    ]  # fmt: skip
    policy = policy_named("fifo")
    result = Simulator(policy, cluster, jobs, quotas=QUOTAS, explain=True, until=until).run()
    return result.waits


def test_the_simulator_and_the_server_hold_back_the_same_jobs_for_the_same_quota(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "ringleader.db")
    users = Users(store.path)
    executor = LocalExecutor(8, warm=False)
    try:
        users.add("alice", quota_gpus=QUOTAS["alice"])
        users.add("bob")
        config = ControllerConfig(tmp_path, policy_named("fifo"), quotas=users.quotas)
        controller = Controller(store, executor, config)
        name_of = {}
        for i, (name, user, gpus) in enumerate(JOBS):
            spec = parse_spec({"name": name, "command": ["true"], "gpus": gpus, "user": user})
            name_of[store.add(spec, now=float(i)).id] = name
        controller._decide(10.0)
        served = {
            name_of[job]: why.code
            for job, why in controller.reasons.items()
            if controller._plan is not None and not controller._plan.of(job).running
        }
        cluster = controller.cluster
    finally:
        executor.warm.close()
        users.close()
        store.close()
    # The simulator, on the server's cluster: every job has arrived by t=4.
    simulated = {job: set(codes) for job, codes in _sim_waits(cluster, 5.0).items()}
    assert served == {"a2": reasons.QUOTA, "b0": reasons.NO_FREE_GPUS}
    assert simulated == {"a2": {reasons.QUOTA}, "b0": {reasons.NO_FREE_GPUS}}


def test_without_quotas_a_round_is_the_policys_decision_and_explains_only_when_asked() -> None:
    views = [sized_job("a", gpus=2), sized_job("b", gpus=2, at=1)]
    cluster = ClusterView.uniform(1, 4)
    policy = policy_named("fifo")
    plain = decide_round(policy, views, cluster, 0.0, owner={})
    assert plain.plan == policy.decide(views, cluster, 0.0)
    assert plain.held_back == {} and plain.reasons == {}
    told = decide_round(policy, views, cluster, 0.0, owner={"a": "u", "b": "u"}, explain=True)
    assert set(told.reasons) == {"a", "b"}
    held = decide_round(policy, views, cluster, 0.0, owner={"a": "u", "b": "u"}, quotas={"u": 2})
    assert set(held.held_back) == {"b"} and not held.plan.of("b").running


def _workload(tmp_path: Path, users: Any, **job: Any) -> Path:
    data = {
        "cluster": {"nodes": 2, "gpus_per_node": 8},
        "users": users,
        "poisson": [
            {"model": "resnet110", "count": 8, "mean_gap_s": 60, "work_scale": 0.2,
             "gpus": 2, "user": "ana", "name_prefix": "ana", **job},
            {"model": "resnet110", "count": 3, "mean_gap_s": 600, "seed": 2, "work_scale": 0.2,
             "gpus": 4, "user": "bo", "name_prefix": "bo"},
        ],
    }  # fmt: skip
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_workload_with_quotas_runs_and_its_json_gives_each_jobs_waits_by_reason(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out.json"
    done = subprocess.run(
        [sys.executable, "-m", "ringleader", "simulate", "--workload",
         str(_workload(tmp_path, {"ana": {"quota_gpus": 4}})), "--policy", "fifo",
         "--json", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert result["quotas"] == {"ana": 4}
    jobs = {j["id"]: j for j in result["jobs"]}
    assert len(jobs) == 11
    held = {i for i, j in jobs.items() if j["waited_s"].get(reasons.QUOTA, 0) > 0}
    assert held and all(i.startswith("ana") for i in held)
    for job in jobs.values():
        # Deciding at every event, a job waits from its arrival to its start, each
        # second of it for the reason the decision before gave.
        queued = job["started_at"] - job["submitted_at"]
        assert sum(job["waited_s"].values()) == pytest.approx(queued, abs=0.01), job
        assert set(job["waited_s"]) <= {
            reasons.QUOTA, reasons.NO_FREE_GPUS, reasons.IN_ORDER, reasons.TIME_SLICE
        }  # fmt: skip


@pytest.mark.parametrize(
    ("users", "job", "expected"),
    [
        ({"ana": {"quota_gpus": -1}}, {}, r"users\.ana\.quota_gpus"),
        ({"ana": {"quota": 4}}, {}, r"users\.ana\.quota"),
        ({"ana": {"quota_gpus": "four"}}, {}, r"users\.ana\.quota_gpus"),
        ({"eve": {"quota_gpus": 4}}, {}, r"users\.eve: no job names user 'eve'"),
        (
            {"ana": {"quota_gpus": 1}},
            {"min_gpus": 2},
            r"users\.ana\.quota_gpus: 1 GPUs, but poisson\[0\] needs at least 2 \(min_gpus\)",
        ),
        (
            {"ana": {"quota_gpus": 2}},
            {"min_gpus": 3, "gpus": 3},
            r"raise the quota to 3 or more, or lower the job's min_gpus",
        ),
    ],
)
def test_a_bad_quota_is_an_error_naming_the_field_and_the_fix(
    tmp_path: Path, users: Any, job: dict[str, Any], expected: str
) -> None:
    path = _workload(tmp_path, users, **job)
    with pytest.raises(WorkloadFileError, match=expected):
        load_workload(path)


def test_a_bad_quota_exits_2_from_simulate_without_a_traceback(tmp_path: Path) -> None:
    path = _workload(tmp_path, {"ana": {"quota_gpus": 0}})
    done = subprocess.run(
        [sys.executable, "-m", "ringleader", "simulate", "--workload", str(path), "--policy",
         "fifo"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert "users.ana.quota_gpus: 0 GPUs" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout
