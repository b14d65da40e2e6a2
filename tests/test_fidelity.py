"""``ringleader fidelity``: the workload file, measuring a run, replaying it, and a real run.

Measuring and replaying are pure, so they are checked on a run whose truth
is known (two jobs sharing one CPU core, built here step by step); the
command itself runs two real jobs on a local server end to end.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ringleader.fidelity import compare, load_fidelity_workload, measure, replay
from ringleader.fidelity.device import DeviceTime
from ringleader.fidelity.real import RealJob, RealRun
from ringleader.fidelity.workload import FidelityFileError, FidelityWorkload
from tests.fidelity_runs import STARTUP_S, STEP_S, WORKLOAD, real_jobs, step_ends

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "fidelity.yaml"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "w.yaml"
    path.write_text(text)
    return path


JOB = "  - {name: a, workload: resnet, epochs: 1%s}\n"


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (", gpu: 2", "jobs[0].gpu"),
        (", args: {epochs: 3}", "set 'epochs' on the job itself"),
        (", gpus: 8", "needs at least 8 devices but the server has 4"),
        (", args: {depth: '20; rm -rf /'}", "jobs[0].args.depth"),
        (", elastic: true, min_gpus: 3, max_gpus: 2", "min_gpus (3) exceeds max_gpus (2)"),
    ],
)
def test_a_bad_file_names_the_field(tmp_path: Path, extra: str, expected: str) -> None:
    path = _write(tmp_path, "version: 1\ndevices: 4\njobs:\n" + JOB % extra)
    with pytest.raises(FidelityFileError, match="invalid fidelity workload") as err:
        load_fidelity_workload(path)
    assert expected in str(err.value)


def test_only_reference_workloads_run(tmp_path: Path) -> None:
    path = _write(tmp_path, "jobs:\n  - {name: a, workload: bash, epochs: 1}\n")
    with pytest.raises(FidelityFileError, match=r"jobs\[0\]\.workload"):
        load_fidelity_workload(path)


def test_duplicate_names_are_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, "jobs:\n" + JOB % "" + JOB % "")
    with pytest.raises(FidelityFileError, match="duplicate names"):
        load_fidelity_workload(path)


def test_the_example_builds_argument_lists() -> None:
    workload = load_fidelity_workload(EXAMPLE)
    assert set(workload.policies) == {"elastic", "time-slicing"}
    first = workload.jobs[0]
    assert first.command()[:3] == ["python", "-m", "ringleader.workloads.resnet"]
    assert first.command()[3:5] == ["--epochs", "12"]
    submitted = [at for at, _ in workload.submissions()]
    assert submitted == sorted(submitted)
    assert sum(j.gpus for j in workload.jobs) > workload.devices  # a burst to time-slice


# -- measuring and replaying a run whose truth is known ------------------------------


def _shared_core_run() -> tuple[RealRun, FidelityWorkload]:
    """Three 1-worker jobs on devices 0, 1 and 2 of 4 on 2 cores: a and c share core 0.

    Each computes a minibatch in ``STEP_S`` alone and in twice that while
    another computes on its core too (the fair share of one core), as the
    real executor pins them.
    """
    device = {"a": 0, "b": 1, "c": 2}

    def speed(job: str, loading: list[str]) -> float:
        return 1.0 / sum(1 for other in loading if device[other] % 2 == device[job] % 2)

    jobs = real_jobs(step_ends(speed), {n: ("local", d) for n, d in device.items()})
    return RealRun("fifo", 4, (0, 1), 10.0, jobs), WORKLOAD


def test_measuring_takes_the_shared_core_out() -> None:
    run, _ = _shared_core_run()
    measured = measure(run)
    for name in ("a", "b", "c"):
        job = measured.jobs[name]
        assert job.step_times[1] == pytest.approx(STEP_S, rel=0.02)
        assert job.startup_s == pytest.approx(STARTUP_S, abs=0.02)
        assert job.examples_per_epoch == 320
        # Each size and share it ran, for a job whose batch adapts: here one of each.
        ((workers, seconds, share),) = job.samples
        assert (workers, share) == (1, 32.0) and seconds == pytest.approx(STEP_S, rel=0.02)
        assert job.reports == ()  # it reported nothing of its gradient


def test_measuring_keeps_the_gradient_a_job_reported_by_how_far_it_had_got() -> None:
    run, _ = _shared_core_run()
    a = run.jobs[0]
    said = [
        {**rec, "epoch": 0.1 * i, "grad_sqr": 0.01 * i, "grad_var": 0.5} if "step" in rec else rec
        for i, rec in enumerate(a.progress)
    ]
    reported = dataclasses.replace(run, jobs=(dataclasses.replace(a, progress=said), *run.jobs[1:]))
    reports = measure(reported).jobs["a"].reports
    steps = [i for i, rec in enumerate(a.progress) if "step" in rec]
    assert len(reports) == len(steps) == 100
    assert reports[-1] == pytest.approx((0.1 * steps[-1], 0.01 * steps[-1], 0.5))


def test_sharing_cores_slows_only_the_part_of_a_step_that_is_not_device_time() -> None:
    # The goodput workload's stand-in for a GPU sleeps: 20 ms a micro-batch, 0.2 ms an
    # example, at most 512 examples a micro-batch.
    device = DeviceTime(0.02, 0.0002, 512)
    assert device.seconds(100) == pytest.approx(0.04)
    assert device.seconds(1024) == pytest.approx(2 * 0.02 + 1024 * 0.0002)
    # A 60 ms step, 40 ms of it device time, its CPU part at half speed: 80 ms.
    assert device.slowed(0.5, 0.06, 100) == pytest.approx(0.06 / 0.08)
    assert DeviceTime().slowed(0.5, 0.06, 100) == 0.5  # all of it CPU
    # Told a job's whole step is device time, measuring leaves its sharing in.
    run, _ = _shared_core_run()
    measured = measure(run, {"a": DeviceTime(STEP_S * 4, 0.0)})
    assert measured.jobs["a"].step_times[1] > 1.3 * STEP_S  # a shared core 0 with c
    assert measured.jobs["c"].step_times[1] == pytest.approx(STEP_S, rel=0.02)


def test_the_replay_reproduces_a_run_it_measured() -> None:
    run, workload = _shared_core_run()
    measured = measure(run)
    result = compare(run, measured, replay(run, measured, workload), wall_s=0.0)
    assert abs(result.avg_jct_error) < 0.01
    for pair in result.jobs:
        assert pair["sim_jct_s"] == pytest.approx(pair["real_jct_s"], rel=0.01)


def test_the_replay_charges_each_job_its_end_as_the_server_saw_it() -> None:
    """From the last minibatch to the server seeing the job end (the final checkpoint,
    the workers' exit, the server's look): 1.3 s a job on the Slurm lab. The replay
    holds the job's GPUs that much longer, charged with its start (``b`` is alone on
    its core, where when it is held does not change anyone's speed)."""
    run, workload = _shared_core_run()
    ends = {"a": 0.0, "b": 2.0, "c": 0.0}
    ended = tuple(
        dataclasses.replace(j, finished_at=(j.finished_at or 0.0) + ends[j.name]) for j in run.jobs
    )
    late = dataclasses.replace(run, jobs=ended)
    measured = measure(late)
    for name, end in ends.items():
        assert measured.jobs[name].end_s == pytest.approx(end, abs=1e-6)
    result = compare(late, measured, replay(late, measured, workload), wall_s=0.0)
    assert abs(result.avg_jct_error) < 0.01
    for pair in result.jobs:
        assert pair["sim_jct_s"] == pytest.approx(pair["real_jct_s"], rel=0.01)


# -- the command, for real ----------------------------------------------------------

TINY = """\
version: 1
devices: 2
round_s: 5
jobs:
  - name: r8
    workload: resnet
    epochs: 6
    args: {depth: 8, examples-per-epoch: 1024, batch: 32, checkpoint-every-s: 2}
    submit_s: 0
    elastic: true
    max_gpus: 2
  - name: lm
    workload: transformer
    epochs: 8
    args: {examples-per-epoch: 2048, batch: 16, length: 32, width: 64, checkpoint-every-s: 2}
    submit_s: 3
    gpus: 1
"""


def _fidelity(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ringleader", "fidelity", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_command_refuses_unknown_and_oracle_policies(tmp_path: Path) -> None:
    path = _write(tmp_path, TINY)
    unknown = _fidelity(str(path), "--policies", "nope")
    assert unknown.returncode == 2
    assert "unknown policy 'nope'" in unknown.stderr
    oracle = _fidelity(str(path), "--policies", "srtf-oracle")
    assert oracle.returncode == 2
    assert "oracle" in oracle.stderr
    assert "Traceback" not in oracle.stderr + unknown.stderr


@pytest.mark.slow
def test_real_jobs_run_and_replay(tmp_path: Path) -> None:
    path = _write(tmp_path, TINY)
    out = tmp_path / "out.json"
    done = _fidelity(
        str(path), "--policies", "elastic", "--json", str(out), "--work-dir", str(tmp_path / "w")
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())["policies"]["elastic"]
    assert {j["name"] for j in result["jobs"]} == {"r8", "lm"}
    for pair in result["jobs"]:
        assert pair["real_jct_s"] > 1.0
        assert pair["sim_jct_s"] > 1.0
    # Loose on purpose: two short jobs on a busy test machine. The tight goal
    # is bench/fidelity.py's, on the example workload.
    assert abs(result["sim_avg_jct_s"] / result["real_avg_jct_s"] - 1) < 0.25
    measured = result["measured"]["jobs"]
    assert set(measured) == {"r8", "lm"}
    assert all(m["step_time_s"] for m in measured.values())
    assert (tmp_path / "w" / "elastic" / "real.json").exists()
    again = _fidelity(str(path), "--policies", "elastic", "--work-dir", str(tmp_path / "w"))
    # Its server would list the first run's jobs beside its own: refused before any runs.
    assert again.returncode == 2
    assert "already holds a real run" in again.stderr and "Traceback" not in again.stderr


def test_a_start_stopped_before_its_first_minibatch_still_counts() -> None:
    """A cold start resized away before it computed: its start-up comes from the restore."""
    shape = {"examples_per_epoch": 320, "batch_per_worker": 32, "world_size": 1}
    progress: list[dict[str, Any]] = [
        {"event": "started", "g": 1, "t_launch": 0.0, "t_restored": 3.5},
        {"event": "started", "g": 2, "t_launch": 4.0, "t_restored": 4.3},
    ]
    progress += [{"g": 2, "step": i, "t": 4.3 + 0.1 * i, **shape} for i in range(1, 40)]
    events = [
        {"t": 0.0, "kind": "launched", "generation": 1, "devices": [["local", 0]]},
        {"t": 3.6, "kind": "stop_requested", "generation": 1},
        {"t": 4.0, "kind": "stopped", "generation": 1},
        {"t": 4.0, "kind": "launched", "generation": 2, "devices": [["local", 0]]},
    ]
    job = RealJob("a", "a-1", "succeeded", 0.0, 0.0, 8.2, events, progress)
    measured = measure(RealRun("fifo", 2, (0, 1), 10.0, (job,))).jobs["a"]
    assert measured.startup_s == pytest.approx(3.5)
    assert measured.restart_s == pytest.approx(4.3 - 3.6, abs=0.01)
    assert measured.step_times[1] == pytest.approx(0.1)


def test_a_start_stopped_while_meeting_its_peers_counts_as_start_up() -> None:
    """Resized away before it even restored (its ranks still meeting): all start-up."""
    shape = {"examples_per_epoch": 320, "batch_per_worker": 32, "world_size": 1}
    progress: list[dict[str, Any]] = [{"event": "started", "g": 2, "t_launch": 3.1}]
    progress += [{"g": 2, "step": i, "t": 3.4 + 0.1 * i, **shape} for i in range(1, 40)]
    events = [
        {"t": 0.0, "kind": "launched", "generation": 1, "devices": [["local", 0], ["local", 1]]},
        {"t": 2.9, "kind": "stop_requested", "generation": 1},
        {"t": 3.1, "kind": "stopped", "generation": 1},
        {"t": 3.1, "kind": "launched", "generation": 2, "devices": [["local", 0]]},
    ]
    job = RealJob("a", "a-1", "succeeded", 0.0, 0.0, 7.3, events, progress)
    measured = measure(RealRun("fifo", 2, (0, 1), 10.0, (job,))).jobs["a"]
    assert measured.startup_s == pytest.approx(3.1)  # was 0: the replay computed from launch
