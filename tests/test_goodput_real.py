"""Goodput on real jobs: a job that opts in reports its gradient's noise, and is
launched at each resize with the batch its goodput is best at on its new GPUs.

The live test runs ``ringleader.workloads.goodput`` on a real server, resized
from 2 GPUs to 1 and back by another job: every step's batch is the one its
launch chose, the learning rate follows it by AdaScale's gain (said in the
log), and the job trains until its epochs' worth at ``global_min`` is done.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ringleader.job.batching import LaunchBatch
from ringleader.policy.model.views import ClusterView, Node
from ringleader.runtime.control.batching import launch_batch
from ringleader.runtime.control.rowview import gradient
from ringleader.runtime.state.rows import JobRow, State
from ringleader.runtime.state.spec import SpecError, parse_spec
from ringleader.spine.kin import KinBook
from tests.live_server import LiveServer, run_cli, wait_for

MODULE = "ringleader.workloads.goodput"
TRAIN = f"python -m {MODULE}"
BOUNDS = {"global_min": 32, "global_max": 512, "per_gpu_max": 128}


def _row(bounds: dict[str, int] = BOUNDS, **shape: float) -> JobRow:
    spec = parse_spec(
        {"name": "g", "command": "x", "elastic": True, "max_gpus": 4, "batch": bounds}
    )
    row = JobRow(id="j1", seq=1, spec=spec, state=State.QUEUED, submitted_at=0.0)
    row.shape.update(shape)
    return row


CLUSTER = ClusterView((Node("n0", 4),))


def test_a_job_that_has_said_nothing_of_its_gradient_takes_global_min() -> None:
    row = _row()
    assert gradient(row) is None
    assert launch_batch(row, 4, CLUSTER) == LaunchBatch(32, 512, 128, per_gpu=8)
    # A job without bounds keeps the batch its script sets: nothing is passed.
    spec = parse_spec({"name": "p", "command": "x"})
    plain = JobRow(id="j2", seq=2, spec=spec, state=State.QUEUED, submitted_at=0.0)
    assert launch_batch(plain, 1, CLUSTER) is None
    plain.shape.update(grad_sqr=1.0, grad_var=1.0)
    assert gradient(plain) is None


def test_until_two_sizes_are_timed_each_gpu_keeps_its_share() -> None:
    row = _row(grad_sqr=0.01, grad_var=4.0, batch_per_worker=16)
    row.observations = {"2": [0.1, 10.0, 100, 16]}
    assert gradient(row) is not None
    assert launch_batch(row, 4, CLUSTER).per_gpu == 16  # type: ignore[union-attr]
    assert launch_batch(row, 1, CLUSTER).per_gpu == 32  # type: ignore[union-attr]  # ≥ global_min


def test_a_job_timed_at_one_size_launches_by_its_kins_sizes_too() -> None:
    # Another job of the same model was timed on 1 and 2 GPUs (5 ms plus 0.5 ms per
    # example): the fit from both sizes tells this one, timed on 2 only, its share.
    book = KinBook()
    other = _row(grad_sqr=0.01, grad_var=4.0, batch_per_worker=16)
    other.observations = {"1": [0.021, 2.1, 100, 32], "2": [0.013, 1.3, 100, 16]}
    assert launch_batch(other, 2, CLUSTER, book) is not None  # its view records them
    row = _row(grad_sqr=0.01, grad_var=4.0, batch_per_worker=16)
    row.observations = {"2": [0.013, 1.3, 100, 16]}
    alone = launch_batch(row, 4, CLUSTER)
    told = launch_batch(row, 4, CLUSTER, book)
    assert alone is not None and alone.per_gpu == 16  # it keeps its share
    assert told == launch_batch(other, 4, CLUSTER, book) and told != alone


def test_noisy_gradients_on_timed_sizes_launch_a_larger_share() -> None:
    # Step times of 5 ms plus 0.5 ms per example, timed on 1 and 2 GPUs.
    row = _row(grad_sqr=0.01, grad_var=4.0, batch_per_worker=16)
    row.observations = {"1": [0.021, 2.1, 100, 32], "2": [0.013, 1.3, 100, 16]}
    noisy = launch_batch(row, 2, CLUSTER)
    row.shape.update(grad_sqr=4.0, grad_var=0.01)  # a gradient with almost no noise
    settled = launch_batch(row, 2, CLUSTER)
    assert noisy is not None and settled is not None
    assert noisy.per_gpu > 16 >= settled.per_gpu


def test_a_share_above_per_gpu_max_is_launched_as_micro_batches_that_accumulate() -> None:
    # A noisy gradient, GPUs that hold 8 examples, and a 7 ms sync on two GPUs (timed:
    # 9 ms a step alone, 16 ms on two): more micro-batches between syncs pay for the
    # sync, so its best share is past what a GPU holds, taken 8 or fewer at a time.
    bounds = {"global_min": 8, "global_max": 4096, "per_gpu_max": 8}
    row = _row(bounds, grad_sqr=0.01, grad_var=4.0, batch_per_worker=8)
    row.observations = {"1": [0.009, 0.9, 100, 8], "2": [0.016, 1.6, 100, 8]}
    pair = launch_batch(row, 2, CLUSTER)
    assert pair is not None and pair.per_gpu <= 8 and pair.accumulate > 1
    assert pair.accumulate == -(-pair.share // 8)  # the fewest micro-batches that hold it
    assert pair.global_batch(2) > 2 * 8  # what two GPUs of 8 could not take at once
    # Alone there is no sync to pay for: each micro-batch costs what it brings.
    alone = launch_batch(row, 1, CLUSTER)
    assert alone is not None and alone.accumulate == 1
    # Before it has said anything, global_min on one GPU: 512 as 4 micro-batches of 128.
    fresh = _row({"global_min": 512, "global_max": 4096, "per_gpu_max": 128})
    assert launch_batch(fresh, 1, CLUSTER) == LaunchBatch(512, 4096, 128, 128, accumulate=4)
    assert launch_batch(fresh, 4, CLUSTER) == LaunchBatch(512, 4096, 128, 128, accumulate=1)


def test_only_bounds_that_cannot_work_are_refused_each_naming_its_field_and_fix() -> None:
    # global_min need not fit on min_gpus at once: the launch accumulates (once refused).
    ok = parse_spec({"name": "g", "command": "x", "batch": {**BOUNDS, "global_min": 512}})
    assert ok.batch is not None and ok.batch.global_min == 512 > ok.lowest * ok.batch.per_gpu_max
    for bad, field, fix in (
        ({"global_min": 600}, "batch.global_max", "raise batch.global_max or lower"),
        ({"per_gpu_max": 0}, "batch.per_gpu_max", "greater than or equal to 1"),
        ({"global_min": 0}, "batch.global_min", "greater than or equal to 1"),
    ):
        with pytest.raises(SpecError) as refused:
            parse_spec({"name": "g", "command": "x", "batch": {**BOUNDS, **bad}})
        [(named, why)] = refused.value.problems
        assert named == field and fix in why, (named, why)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    # The default policy, whose size stage weighs goodput where jobs report it.
    live = LiveServer(tmp_path_factory.mktemp("goodput-server"), 2, 2.0, "--policy", "ringleader")
    yield live.start()
    live.stop()
    live.kill_workers()


def _steps(progress: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in progress if "step_time" in r]


@pytest.mark.slow
def test_a_job_that_opts_in_is_relaunched_with_the_batch_its_goodput_is_best_at(
    server: LiveServer, tmp_path: Path
) -> None:
    command = f"{TRAIN} --epochs 16 --examples 2048 --compute-ms-per-example 0.5"
    spec = {
        "name": "adaptive",
        "command": command + " --step-ms 5",
        "elastic": True,
        "min_gpus": 1,
        "max_gpus": 2,
        "gpus": 2,
        "batch": BOUNDS,
        "workdir": str(tmp_path),
        "epochs": 16.0,
    }
    job_id = server.submit(spec)
    wait_for(lambda: server.job(job_id)["step"] > 40, 90, "2 ranks training")
    other = server.submit({"name": "other", "command": ["sleep", "8"], "workdir": str(tmp_path)})
    job = server.wait_state(job_id, {"succeeded", "failed"}, 300)
    assert job["state"] == "succeeded", job.get("error")
    assert server.job(other)["state"] == "succeeded"
    steps = _steps(server.progress(job_id))
    by_generation: dict[int, set[tuple[int, int]]] = {}
    for r in steps:
        by_generation.setdefault(r["g"], set()).add((r["world_size"], r["batch_per_worker"]))
    assert all(len(seen) == 1 for seen in by_generation.values())  # one batch per launch
    launches = [next(iter(by_generation[g])) for g in sorted(by_generation)]
    assert launches[0] == (2, 16)  # global_min over 2 GPUs: nothing measured yet
    assert (1, 32) in launches  # shrunk: one size timed, so each GPU keeps what it had
    # Back on 2 GPUs with both sizes timed and a gradient far noisier than 32 examples:
    # a larger batch pays, so the launch takes one.
    assert launches[-1][0] == 2 and launches[-1][1] > 16, launches
    assert all(r["grad_sqr"] > 0 and "grad_var" in r for r in steps[-10:])
    shown = server.job(job_id)
    assert shown["batch"] == 2 * launches[-1][1] and shown["noise_scale"] > 32
    said = run_cli(server.url, "show", job_id)
    assert f"batch: {shown['batch']} (adapts within 32..512; gradient noise scale" in said.stdout
    assert steps[-1]["batch_min"] == 32 and steps[-1]["batch_max"] == 512
    # Trained to its 16 epochs' worth at global_min; a larger batch's step counts less
    # than its examples, so more than 16 epochs of data went by.
    assert steps[-1]["epoch"] >= 16.0
    examples = sum(r["world_size"] * r["batch_per_worker"] for r in steps)
    assert examples > 16 * 2048
    log = server.http.get(f"/jobs/{job_id}/logs", params={"rank": 0}, timeout=10).text
    assert "lr_rule 'adascale' (tuned at 32 examples per step): 2 workers x 16 examples" in log
    last = re.findall(rf"2 workers x {int(launches[-1][1])} examples, learning rate x([\d.]+)", log)
    assert last and float(last[-1]) > 1  # AdaScale: the larger batch's step is worth more


@pytest.mark.slow
def test_a_job_launched_at_global_min_is_relaunched_where_it_runs_for_a_better_batch(
    server: LiveServer, tmp_path: Path
) -> None:
    # A teacher of the same model runs at two sizes and two shares first (its kin,
    # ``spine.kin``). The learner, on one GPU for good, starts at global_min before it
    # has said anything of its gradient; once it has, a noisy gradient and a step
    # mostly fixed cost make a larger batch pay on that GPU, and a round relaunches it
    # there (``spine.batching.rebatched``), where no resize would ever come. A step is
    # 40 ms fixed and 0.1 ms an example: at 20 and 0.2 the fit from the teacher's two
    # sizes told a share of 124 only 1.45-1.50x the goodput of 32, at the relaunch's
    # bar (``REBATCH_GAIN``), and a learner whose noise estimate stayed below it was
    # never relaunched; here it tells about 2x.
    args = "--examples 4096 --flipped 0.3 --step-ms 40 --compute-ms-per-example 0.1"

    def spec(epochs: int) -> dict[str, Any]:
        return {
            "command": f"{TRAIN} --epochs {epochs} {args}",
            "elastic": True,
            "min_gpus": 1,
            "batch": BOUNDS,
            "workdir": str(tmp_path),
            "epochs": float(epochs),
        }

    teacher = server.submit(spec(8) | {"name": "teacher", "max_gpus": 2, "gpus": 2})
    wait_for(lambda: server.job(teacher)["step"] > 40, 90, "2 ranks training")
    server.submit({"name": "other", "command": ["sleep", "4"], "workdir": str(tmp_path)})
    assert server.wait_state(teacher, {"succeeded", "failed"}, 200)["state"] == "succeeded"
    learner = server.submit(spec(16) | {"name": "learner", "max_gpus": 1, "gpus": 1})
    shown = server.wait_state(learner, {"succeeded", "failed"}, 200)
    assert shown["state"] == "succeeded", shown.get("error")
    events = shown["events"]
    launches = [e for e in events if e["kind"] == "launched"]
    stops = [e for e in events if e["kind"] == "stop_requested"]
    # once: then it runs at its best (on a failure, the job as shown says what it saw)
    assert [e["reason"] for e in stops] == ["rebatch"], (events, shown.get("noise_scale"))
    assert [(e["workers"], e["counted"]) for e in launches] == [(1, "start"), (1, "restart")]
    assert launches[0]["batch"] == 32 and launches[1]["batch"] > 2 * 32, launches
    assert launches[0]["t"] < stops[0]["t"] < launches[1]["t"]
    steps = _steps(server.progress(learner))
    last = max(r["g"] for r in steps)
    assert {r["batch_per_worker"] for r in steps if r["g"] == last} == {launches[1]["batch"]}


def _train(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {
        k: v for k, v in os.environ.items() if not k.startswith(("RINGLEADER_", "TORCHELASTIC_"))
    }
    return subprocess.run(
        [sys.executable, "-m", MODULE, "--epochs", "2", "--examples", "1024", *args],
        cwd=tmp_path,
        env=clean | env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_weights_that_stop_being_finite_end_the_job_saying_why(tmp_path: Path) -> None:
    blown = _train(tmp_path, "--lr", "1e12", "--lr-rule", "linear")
    assert blown.returncode == 1
    assert "the weights are not finite at step 10 (lr_rule 'linear'" in blown.stderr
    text = (tmp_path / "elastic-checkpoints" / "local" / "progress.jsonl").read_text()
    progress = [json.loads(line) for line in text.splitlines()]
    assert progress[-1]["event"] == "diverged"


def test_no_checkpoint_of_weights_that_are_not_finite_is_written(tmp_path: Path) -> None:
    # 8 steps in all: the look before the final checkpoint is what finds them.
    blown = _train(tmp_path, "--examples", "128", "--lr", "1e12", "--lr-rule", "linear")
    assert blown.returncode == 1
    assert "the weights are not finite at step 8" in blown.stderr
    saved = tmp_path / "elastic-checkpoints" / "local" / "checkpoints"
    assert not saved.exists() or not any(saved.iterdir())


def test_a_ported_script_says_its_loss_with_each_step(tmp_path: Path) -> None:
    ran = _train(tmp_path)
    assert ran.returncode == 0, ran.stderr[-2000:]
    text = (tmp_path / "elastic-checkpoints" / "local" / "progress.jsonl").read_text()
    losses = [r["loss"] for r in map(json.loads, text.splitlines()) if "step_time" in r]
    assert losses and all(isinstance(v, float) and 0 < v < 5 for v in losses)


def test_a_spec_that_allows_it_goes_on_and_says_so_once(tmp_path: Path) -> None:
    kept = _train(
        tmp_path, "--lr", "1e12", "--lr-rule", "linear", RINGLEADER_ON_NON_FINITE="continue"
    )
    assert kept.returncode == 0, kept.stderr[-2000:]
    assert kept.stderr.count("the weights are not finite") == 1
    assert "going on, as the spec asks" in kept.stderr


@pytest.mark.slow
def test_a_diverged_job_is_failed_at_once_with_the_reason(
    server: LiveServer, tmp_path: Path
) -> None:
    spec = {
        "name": "blown",
        "command": f"{TRAIN} --epochs 4 --examples 1024 --lr 1e12 --lr-rule linear",
        "workdir": str(tmp_path),
        "epochs": 4.0,
        "retries": 2,
    }
    job = server.wait_state(server.submit(spec), {"succeeded", "failed"}, 120)
    assert job["state"] == "failed" and job["attempts"] == 1  # no retry into the same rate
    assert "the weights are not finite at step 10" in job["error"]
    assert "a retry would meet the same rate" in job["error"]
