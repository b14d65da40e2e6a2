"""Measured tables per GPU type: a job plays each type's table, not one factor (issue 57)."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from ringleader.perf.measured import read_measured_job
from ringleader.policy import policy_named
from ringleader.sim import Simulator
from ringleader.sim.pollux import DATA
from ringleader.sim.workload_file import load_workload
from ringleader.sim.workload_spec import WorkloadFileError

CIFAR10 = DATA / "traces" / "cifar10"
STARTUP_S = 3.8
"""The simulator's restart delay, which a job's first start pays too."""


def _profile(tmp_path: Path) -> Path:
    """cifar10 as measured (``fast``), and a ``slow`` type whose compute takes twice as
    long and whose gradient sync four times: the slow type loses more the more a
    placement syncs, so no one factor describes it."""
    folder = tmp_path / "c10"
    shutil.copytree(CIFAR10, folder)
    with (CIFAR10 / "placements.csv").open() as f:
        rows = list(csv.DictReader(f))
    with (folder / "placements-slow.csv").open("w") as f:
        out = csv.DictWriter(f, fieldnames=list(rows[0]))
        out.writeheader()
        for row in rows:
            step, sync = float(row["step_time"]), float(row["sync_time"])
            out.writerow({**row, "step_time": 2 * (step - sync) + 4 * sync, "sync_time": 4 * sync})
    return folder


def _workload(tmp_path: Path, jobs: list[dict[str, Any]], **model: Any) -> Path:
    data = {
        "cluster": {
            "types": {
                "fast": {"nodes": 1, "gpus_per_node": 4},
                "slow": {"nodes": 2, "gpus_per_node": 4},
            }
        },
        "measured_models": {
            "c10": {
                "profile": str(_profile(tmp_path)),
                "epochs": 20,
                "types": {
                    "fast": {"placements": "placements.csv"},
                    "slow": {"placements": "placements-slow.csv"},
                },
                **model,
            }
        },
        "jobs": jobs,
    }
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _finished(path: Path, policy: str = "fifo") -> dict[str, float]:
    workload = load_workload(path)
    result = Simulator(policy_named(policy), workload.cluster, workload.jobs).run()
    return {r.id: r.finished_at for r in result.records if r.finished_at is not None}


def test_a_job_on_a_slower_type_runs_at_that_types_table_not_at_one_factor(
    tmp_path: Path,
) -> None:
    # b holds the one fast node, so d (allowed either type) runs on two slow nodes.
    path = _workload(
        tmp_path,
        [
            {
                "name": "b",
                "model": "c10",
                "gpus": 4,
                "elastic": False,
                "global_batch": 512,
                "gpu_type": ["fast"],
            },
            {
                "name": "d",
                "model": "c10",
                "gpus": 8,
                "elastic": False,
                "global_batch": 512,
                "submit_s": 1,
            },
        ],
    )
    folder = tmp_path / "c10"
    fast = read_measured_job(folder, epochs=20)
    slow = read_measured_job(folder, epochs=20, placements="placements-slow.csv")
    done = _finished(path)
    assert done["b"] == pytest.approx(STARTUP_S + fast.seconds((4,), 512))
    assert done["d"] == pytest.approx(1 + STARTUP_S + slow.seconds((4, 4), 512))
    # What a policy is told is one factor per type; on two nodes it is off by a quarter.
    d = next(j for j in load_workload(path).jobs if j.id == "d")
    assert d.type_speed is not None and d.type_speed["fast"] == 1.0
    truth = fast.seconds((4, 4), 512) / slow.seconds((4, 4), 512)
    assert d.type_speed["slow"] > 1.2 * truth


@pytest.mark.parametrize("adaptive", [False, True])
def test_a_job_played_on_another_types_table_ends_as_one_measured_there_alone(
    tmp_path: Path, adaptive: bool
) -> None:
    # The same job twice: once free to take either type but kept off the fast one, once
    # allowed only the slow one (whose table is then its own profile). An adaptive job's
    # ratio between types is worked out again every epoch, as its batch changes.
    blocker = {
        "name": "b",
        "model": "c10",
        "gpus": 4,
        "elastic": False,
        "global_batch": 512,
        "gpu_type": ["fast"],
        "work_scale": 50.0,
    }
    job = {
        "name": "d",
        "model": "c10",
        "gpus": 4,
        "elastic": False,
        "global_batch": 512,
        "submit_s": 1,
    }
    either = _finished(_workload(tmp_path / "a", [blocker, job], adaptive=adaptive))
    only = _finished(
        _workload(tmp_path / "b", [blocker, {**job, "gpu_type": ["slow"]}], adaptive=adaptive)
    )
    assert either["d"] == pytest.approx(only["d"], rel=1e-9)
    assert either["d"] < either["b"]  # it did run beside the blocker, on the slow type


def test_one_table_for_every_type_runs_on_a_typed_cluster(tmp_path: Path) -> None:
    path = _workload(
        tmp_path,
        [{"name": "a", "model": "c10", "gpus": 4, "elastic": False, "global_batch": 512}],
        types={},
    )
    folder = tmp_path / "c10"
    assert _finished(path)["a"] == pytest.approx(
        STARTUP_S + read_measured_job(folder, epochs=20).seconds((4,), 512)
    )


@pytest.mark.parametrize(
    ("change", "job", "expected"),
    [
        (
            {"types": {"k80": {"placements": "placements.csv"}}},
            {},
            "measured_models.c10.types.k80: the cluster has no k80 GPUs",
        ),
        (
            {"types": {"slow": {"placements": "placements-none.csv"}}},
            {},
            "measured_models.c10.types.slow: ",
        ),
        (
            {"types": {"slow": {"placements": "../placements.csv"}}},
            {},
            "measured_models.c10.types.slow.placements",
        ),
        (
            {"types": {"slow": {"placements": "placements.csv", "scalability": "no.csv"}}},
            {},
            "no.csv: no such file",
        ),
        (
            {"types": {"slow": {"placements": "placements-slow.csv"}}},
            {"gpu_type": ["fast"]},
            "jobs[0].gpu_type: model 'c10' was measured on slow only",
        ),
    ],
)
def test_a_bad_type_table_names_the_field(
    tmp_path: Path, change: dict[str, Any], job: dict[str, Any], expected: str
) -> None:
    path = _workload(
        tmp_path,
        [{"name": "a", "model": "c10", "gpus": 4, "global_batch": 512, **job}],
        **change,
    )
    with pytest.raises(WorkloadFileError) as err:
        load_workload(path)
    assert expected in str(err.value)


def test_a_policy_that_may_know_the_truth_is_told_each_types_table_and_no_other_is(
    tmp_path: Path,
) -> None:
    from ringleader.policy.model.needs import Needs
    from ringleader.sim.jobs import arrived

    path = _workload(tmp_path, [{"name": "d", "model": "c10", "gpus": 4, "global_batch": 512}])
    job = load_workload(path).jobs[0]
    assert job.type_profiles is not None
    slow = job.type_profiles["slow"]
    oracle = arrived(job, 0.0).view(12, Needs(true_model=True), 3.8)
    assert set(oracle.type_models) == {"fast", "slow"}
    # Two slow nodes, as measured there; one factor would have said a seventh faster.
    assert oracle.type_models["slow"].step_time(8) == slow.step_times[8]
    assert job.type_speed is not None
    told = oracle.speed.step_time(8) / job.type_speed["slow"]  # type: ignore[union-attr]
    assert told < 0.9 * slow.step_times[8]
    online = arrived(job, 0.0).view(12, Needs(speed_model=True), 3.8)
    assert online.type_models == {} and online.speed is None


def test_sia_weighs_each_types_configurations_by_that_types_table(tmp_path: Path) -> None:
    import dataclasses

    from ringleader.policy.allot.sia import Sia, configurations
    from ringleader.policy.model.needs import Needs
    from ringleader.policy.model.objective import Candidate
    from ringleader.sim.jobs import arrived

    path = _workload(tmp_path, [{"name": "d", "model": "c10", "gpus": 4, "global_batch": 512}])
    workload = load_workload(path)
    job = workload.jobs[0]
    assert job.type_profiles is not None
    view = arrived(job, 0.0).view(12, Needs(true_model=True), 3.8)
    offered = configurations(workload.cluster)
    fast4 = offered.index(("fast", 4))  # type: ignore[arg-type]
    slow8 = offered.index(("slow", 8))  # type: ignore[arg-type]

    def ratio(v: Any) -> float:
        row = Sia()._row(Candidate(v, v.speed), offered, workload.cluster, 0.0)
        assert row is not None
        _, options, gains, _ = row
        return float(gains[options.index(slow8)] / gains[options.index(fast4)])

    tables = job.type_profiles
    truth = tables["fast"].seconds_on((4,)) / tables["slow"].seconds_on((4, 4))
    assert ratio(view) == pytest.approx(truth)
    # Told only one factor per type, Sia would weigh the two slow nodes otherwise.
    assert ratio(dataclasses.replace(view, type_models={})) > 1.1 * truth
