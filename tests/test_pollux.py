"""Pollux's workloads and profiles load as they are and play as Pollux published (issue 57)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ringleader.policy.catalog import policy_from_config
from ringleader.sim import pollux
from ringleader.sim.result import SimResult

WORKLOAD_1 = pollux.DATA / "workloads" / "workload-1.csv"


def _play(policy: str, workload: Path = WORKLOAD_1) -> SimResult:
    jobs = pollux.pollux_jobs(workload, pollux.DATA / "traces")
    thresholds = pollux.TIRESIAS_THRESHOLDS_GPU_S if policy == "tiresias" else None
    return pollux.play(jobs, policy_from_config(policy, thresholds_gpu_s=thresholds))


def test_the_bundled_workloads_load_unchanged_with_their_profiles() -> None:
    """Every workload at load 1.0, and the busiest at the other loads."""
    files = sorted((pollux.DATA / "workloads").glob("*.csv"))
    files += [
        pollux.DATA / f"workloads-{load}" / "workload-7.csv" for load in ("0.5", "1.5", "2.0")
    ]
    for csv in files:
        jobs = pollux.pollux_jobs(csv, pollux.DATA / "traces")
        assert len(jobs) == len(csv.read_text().splitlines()) - 1 >= 80, csv
        assert all(j.requested_gpus <= j.max_gpus <= 64 for j in jobs)


@pytest.mark.parametrize("policy", ["tiresias", "optimus"])
def test_tiresias_and_optimus_are_within_5_percent_of_pollux_on_workload_1(policy: str) -> None:
    result = _play(policy)
    assert result.summary.finished == 160
    published = pollux.published_avg(policy, "workload-1", "1.0")
    assert published is not None
    assert result.summary.avg_jct_s == pytest.approx(published, rel=0.05)


def test_ncf_is_held_to_one_gpu_and_others_to_what_their_batch_spreads_over() -> None:
    jobs = {j.id: j for j in pollux.pollux_jobs(WORKLOAD_1, pollux.DATA / "traces")}
    ncf = next(j for i, j in jobs.items() if i.startswith("ncf"))
    assert ncf.max_gpus == 1
    cifar = next(j for i, j in jobs.items() if i.startswith("cifar10") and j.requested_gpus == 6)
    assert cifar.max_gpus == 2048 // 32  # the smallest per-GPU batch measured is 32


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ringleader", "simulate", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_simulate_pollux_prints_the_published_average_beside_ours(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    done = _cli("--pollux", "pollux:workload-1", "--policy", "optimus", "--json", str(out))
    assert done.returncode == 0, done.stderr
    assert "Pollux's simulator published 4,087 s" in " ".join(done.stdout.split())
    data = json.loads(out.read_text())
    assert data["published_avg_jct_s"] == pytest.approx(4087.06, abs=0.01)
    assert len(data["jobs"]) == 160


@pytest.mark.parametrize(
    ("csv", "expected"),
    [
        ("name,time,application,num_replicas,batch_size\na,0,cifar10,2,99999999\n", "outside"),
        ("name,time,application,num_replicas,batch_size\na,-5,cifar10,2,256\n", "time -5"),
        ("name,time,application,num_replicas,batch_size\na,0,nope,2,256\n", "has no profile"),
        ("name,time,application,num_replicas,batch_size\na,0,cifar10,0,256\n", "num_replicas"),
        ("name,time,application\na,0,cifar10\n", "header lacks num_replicas"),
    ],
)
def test_a_bad_pollux_workload_exits_2_naming_the_row_and_field(
    tmp_path: Path, csv: str, expected: str
) -> None:
    path = tmp_path / "w.csv"
    path.write_text(csv)
    done = _cli("--pollux", str(path), "--policy", "optimus")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert expected in " ".join(done.stderr.split())
    assert str(path.name) in done.stderr


def test_an_imported_pollux_workload_plays_as_the_pollux_flag_does(tmp_path: Path) -> None:
    out = tmp_path / "w1.yaml"
    command = ["import", "pollux", "pollux:workload-1", "-o", str(out)]
    done = subprocess.run(
        [sys.executable, "-m", "ringleader", *command],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    from ringleader.sim.workload_file import load_workload

    workload = load_workload(out)
    assert workload.spec.simulation.tiresias_thresholds_gpu_s == [57_600.0]
    levels = tuple(workload.spec.simulation.tiresias_thresholds_gpu_s or ())
    played = pollux.play(workload.jobs, policy_from_config("tiresias", thresholds_gpu_s=levels))
    assert played.summary.avg_jct_s == pytest.approx(_play("tiresias").summary.avg_jct_s)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"jobs": [{"name": "a", "model": "c10"}]}, "jobs[0].global_batch: model 'c10' is"),
        (
            {
                "measured_models": {
                    "c10": {
                        "profile": str(pollux.DATA / "traces" / "cifar10"),
                        "types": {"v100": {"placements": "placements.csv"}},
                    }
                }
            },
            "measured_models.c10.types.v100: the cluster has no v100 GPUs (its GPUs name no type",
        ),
        ({"measured_models": {"c10": {"profile": "nowhere"}}}, "measured_models.c10.profile"),
        (
            {"jobs": [{"name": "a", "model": "c10", "global_batch": 10**8}]},
            "jobs[0].global_batch: cifar10: global batch 100000000 is outside",
        ),
    ],
)
def test_a_bad_measured_model_in_a_workload_file_names_the_field(
    tmp_path: Path, change: dict[str, object], expected: str
) -> None:
    import yaml

    from ringleader.sim.workload_file import load_workload
    from ringleader.sim.workload_spec import WorkloadFileError

    data: dict[str, object] = {
        "cluster": {"nodes": 2, "gpus_per_node": 4},
        "measured_models": {"c10": {"profile": str(pollux.DATA / "traces" / "cifar10")}},
        "jobs": [{"name": "a", "model": "c10", "gpus": 2, "global_batch": 512}],
        **change,
    }
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(WorkloadFileError) as err:
        load_workload(path)
    assert expected in str(err.value)


def test_a_table_too_thin_to_interpolate_exits_2_and_says_what_to_measure(tmp_path: Path) -> None:
    app = tmp_path / "traces" / "tiny"
    app.mkdir(parents=True)
    (app / "placements.csv").write_text(
        "placement,local_bsz,step_time,sync_time\n4,32,0.1,0.01\n4,64,0.2,0.01\n"
    )
    (app / "validation-64.csv").write_text("progress,grad_sqr,grad_var\n100,1,1\n200,1,1\n")
    path = tmp_path / "w.csv"
    path.write_text("name,time,application,num_replicas,batch_size\na,0,tiny,2,64\n")
    done = _cli("--pollux", str(path), "--profiles", str(tmp_path / "traces"), "--policy", "fifo")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "Qhull" not in done.stdout + done.stderr
    assert "w.csv:2: tiny: no size from 1 to 2 GPUs" in " ".join(done.stderr.split())
