"""Gandiva's mechanisms on the real runtime: real processes sharing one virtual device."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.live_server import LiveServer, tiny_job, wait_for

pytestmark = pytest.mark.slow


def _server(tmp_path: Path, gpus: int, policy: str, quantum_s: float, *more: str) -> LiveServer:
    return LiveServer(
        tmp_path / "state", gpus, 1.0, "--policy", policy, "--quantum-s", str(quantum_s), *more
    ).start()


@pytest.fixture
def stop_after() -> Iterator[list[LiveServer]]:
    servers: list[LiveServer] = []
    yield servers
    for s in servers:
        s.stop()
        s.kill_workers()


def _steps(progress: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in progress if "loss" in r]


def _overlaps(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """Intervals in which both jobs were computing minibatches at once."""
    spans_b = [(r["t"] - r["step_time"], r["t"]) for r in _steps(b)]
    out = []
    for r in _steps(a):
        s, e = r["t"] - r["step_time"], r["t"]
        out.extend((max(s, s2), min(e, e2)) for s2, e2 in spans_b if s2 < e and s < e2)
    return sorted(out)


def test_three_jobs_time_sliced_on_one_device_all_progress(
    tmp_path: Path, stop_after: list[LiveServer]
) -> None:
    server = _server(tmp_path, 1, "time-slicing", 2.0)
    stop_after.append(server)
    # Long enough (~5 s of compute each, 2 s quanta) that all three are under way together.
    ids = [server.submit(tiny_job(f"slice{i}", epochs=50)) for i in range(3)]
    all_going: list[bool] = []

    def check() -> bool:
        jobs = [server.job(i) for i in ids]
        if all(j["step"] > 0 and j["state"] in ("running", "suspended") for j in jobs):
            all_going.append(True)
        return all(j["state"] in ("succeeded", "failed") for j in jobs)

    wait_for(check, 240, "three time-sliced jobs to finish")
    assert all_going, "never saw all three jobs started and unfinished at once"
    for job_id in ids:
        job = server.job(job_id)
        assert job["state"] == "succeeded"
        kinds = [e["kind"] for e in job["events"]]
        assert "suspend_requested" in kinds and "resume_requested" in kinds
        steps = [r["step"] for r in _steps(server.progress(job_id))]
        assert steps == list(range(1, len(steps) + 1))  # one generation, no step lost
    # Never two at once: time-slicing, not packing.
    for i, a in enumerate(ids):
        for b in ids[i + 1 :]:
            shared = sum(e - s for s, e in _overlaps(server.progress(a), server.progress(b)))
            assert shared < 0.5


def test_the_default_policy_time_slices_its_last_queue_on_real_processes(
    tmp_path: Path, stop_after: list[LiveServer]
) -> None:
    # One queue (no thresholds): every job is in the default's last queue, where
    # jobs take turns instead of waiting for the one ahead to end.
    server = _server(tmp_path, 1, "ringleader", 2.0, "--tiresias-thresholds", "")
    stop_after.append(server)
    # The first runs long enough to outlast the second's start-up and a turn back: at 20
    # epochs, in one loaded fresh-clone `make test`, it had ended 0.5 s before the
    # second's first step (likely its start-up outlasted the 2-s quantum).
    ids = [server.submit(tiny_job(f"turn{i}", epochs=60 if i == 0 else 20)) for i in range(2)]
    for job_id in ids:
        assert server.wait_state(job_id, {"succeeded", "failed"}, 180)["state"] == "succeeded"
    kinds = {job_id: [e["kind"] for e in server.job(job_id)["events"]] for job_id in ids}
    # The first gave way to the second's first turn (suspended in place); once both
    # are measured alone the default may also run them packed on trial
    # (policy.packing). Either way no process is ever restarted.
    assert "suspend_requested" in kinds[ids[0]], kinds
    for job_id in ids:
        assert kinds[job_id].count("launched") == 1, kinds
        steps = [r["step"] for r in _steps(server.progress(job_id))]
        assert steps == list(range(1, len(steps) + 1))
    # The second job did not wait for the first to end: it trained in between.
    first_end = _steps(server.progress(ids[0]))[-1]["t"]
    assert _steps(server.progress(ids[1]))[0]["t"] < first_end


def _cancel(server: LiveServer, job_id: str) -> None:
    """Cancel a job that has shown what its test judges; it may have just ended."""
    server.http.delete(f"/jobs/{job_id}", timeout=10)  # 409 if it has just ended
    assert server.wait_state(job_id, {"cancelled", "succeeded"}, 60)["state"] != "failed"


def _alone_after_a_trial(server: LiveServer, a: str, b: str) -> int:
    """``a``'s minibatches more than a second after it last ran packed with ``b``
    (0 before any packed minibatch)."""
    time.sleep(1.0)  # between looks: each reads both jobs' whole progress
    progress = server.progress(a)
    overlaps = _overlaps(progress, server.progress(b))
    if not overlaps:
        return 0
    last = max(e for _, e in overlaps)
    return sum(1 for r in _steps(progress) if r["t"] > last + 1)


def test_a_packing_that_hurts_is_reverted_within_two_windows(
    tmp_path: Path, stop_after: list[LiveServer]
) -> None:
    # On a CPU "device" two packed jobs only split the cores (and oversubscribe
    # their threads): each runs at well under half speed, so the trial the
    # policy starts once both have run alone must fail and be reverted.
    # Quanta of 5 s give each job a few hundred minibatches alone before the
    # trial: over one short turn a single stalled minibatch (the machine busy
    # elsewhere for most of a second) once made a job's time alone look as slow
    # as packed, and the pair was kept. Measurement noise, not the revert.
    quantum = 5.0
    server = _server(tmp_path, 1, "gandiva", quantum)
    stop_after.append(server)
    # Long enough to outlive both turns alone: at 90 epochs each, on the fastest hour
    # seen (calibration loop 0.23 s) the file's run failed here, at 7ea1401's policy
    # code and at 46b054a's alike (no trial seen); at 240 it passed.
    # Both are cancelled once the trial is over and ``a`` has run alone again for a
    # while: running the rest of their epochs out took a minute and showed nothing more.
    a = server.submit(tiny_job("pack-a", epochs=240))
    b = server.submit(tiny_job("pack-b", epochs=240))
    wait_for(lambda: _alone_after_a_trial(server, a, b) >= 30, 240, "a trial and its revert")
    for job_id in (a, b):
        assert server.job(job_id)["state"] != "failed"
        _cancel(server, job_id)
    overlaps = _overlaps(server.progress(a), server.progress(b))
    assert overlaps, "the policy never tried packing the two jobs"
    start = overlaps[0][0]
    last = max(e for _, e in overlaps)
    window = 0.75 * quantum
    # Judged at the first quantum boundary after one window of packed running:
    # the trial is over within two windows (plus a boundary and a tick).
    assert last - start <= 2 * window + quantum
    packed_steps = [r["step_time"] for r in _steps(server.progress(a)) if start <= r["t"] <= last]
    alone_steps = [r["step_time"] for r in _steps(server.progress(a)) if r["t"] > last + 1]
    assert packed_steps and alone_steps
    assert sum(packed_steps) / len(packed_steps) > 2 * sorted(alone_steps)[len(alone_steps) // 2]


def _moved_and_trained(server: LiveServer, jobs: tuple[str, ...]) -> bool:
    """Whether one of ``jobs`` has run in two generations, 10 minibatches in the last."""
    time.sleep(1.0)  # between looks: each reads the jobs' whole progress
    for job_id in jobs:
        steps = _steps(server.progress(job_id))
        if len({r["g"] for r in steps}) > 1 and sum(r["g"] == steps[-1]["g"] for r in steps) >= 10:
            return True
    return False


def test_migration_keeps_the_step_count_and_loss_continuous(
    tmp_path: Path, stop_after: list[LiveServer]
) -> None:
    # Two devices, three jobs: the third time-slices with the first. Once all
    # three have trained, the job alone on the second device is cancelled: a
    # job of the crowded device migrates there (checkpoint, stop, relaunch).
    server = _server(tmp_path, 2, "time-slicing", 2.0)
    stop_after.append(server)
    first = server.submit(tiny_job("first", epochs=150))
    other = server.submit(tiny_job("other", epochs=3000))
    wait_for(lambda: server.job(other)["step"] > 0, 60, "the second job to start")
    third = server.submit(tiny_job("third", epochs=150))
    wait_for(
        lambda: all(server.job(j)["step"] > 0 for j in (first, third)),
        60,
        "both time-sliced jobs to have trained",
    )
    server.cancel(other)
    # Both are cancelled once one has trained a while where it moved to: running their
    # epochs out took half a minute more and showed nothing more.
    wait_for(lambda: _moved_and_trained(server, (first, third)), 240, "a job to migrate")
    for job_id in (first, third):
        assert server.job(job_id)["state"] not in ("failed", "cancelled")
        _cancel(server, job_id)
    moved = [j for j in (first, third) if len({r["g"] for r in _steps(server.progress(j))}) > 1]
    assert moved, "no job migrated when the cancelled job's device came free"
    for job_id in moved:
        progress = server.progress(job_id)
        steps = [r["step"] for r in _steps(progress)]
        assert steps == sorted(steps) and len(set(steps)) == len(steps)
        stops = [r for r in progress if r.get("event") == "stopped"]
        starts = [r for r in progress if r.get("event") == "started"][1:]
        for stop, start in zip(stops, starts, strict=False):
            assert start["restored_step"] == stop["step"]
            losses = [r["loss"] for r in _steps(progress)]
            before = [r["loss"] for r in _steps(progress) if r["step"] <= stop["step"]][-5:]
            after = [r["loss"] for r in _steps(progress) if r["step"] > stop["step"]][:5]
            # Continuous: after the move the loss carries on near where it was; a
            # lost model or optimizer would send it back toward its first values.
            scale = sum(losses[:5]) / 5
            assert abs(sum(after) / len(after) - sum(before) / len(before)) < 0.25 * scale
        launches = [e for e in server.job(job_id)["events"] if e["kind"] == "launched"]
        assert len({tuple(map(tuple, e["devices"])) for e in launches}) > 1


def test_priority_changes_through_the_api_and_bad_requests_name_the_field(
    tmp_path: Path, stop_after: list[LiveServer]
) -> None:
    server = _server(tmp_path, 1, "time-slicing", 2.0)
    stop_after.append(server)
    low = server.submit(tiny_job("low", epochs=40))
    wait_for(lambda: server.job(low)["step"] > 0, 60, "the first job to run")
    high = server.submit(tiny_job("high", epochs=4))
    r = server.http.patch(f"/jobs/{high}", json={"priority": 5}, timeout=10)
    assert r.status_code == 200 and r.json()["spec"]["priority"] == 5
    # The high-priority job runs to the end while the low one waits suspended.
    assert server.wait_state(high, {"succeeded", "failed"}, 120)["state"] == "succeeded"
    high_end = server.job(high)["finished_at"]
    low_steps = [r for r in _steps(server.progress(low)) if r["t"] < high_end]
    high_start = min(r["t"] - r["step_time"] for r in _steps(server.progress(high)))
    assert not [r for r in low_steps if r["t"] - r["step_time"] > high_start + 0.5]
    kinds = [e["kind"] for e in server.job(high)["events"]]
    assert "priority" in kinds
    for body, field in (
        ({"priority": "high"}, "priority"),
        ({"priority": 5000}, "priority"),
        ({"priority": 1, "gpus": 4}, "(body)"),
    ):
        bad = server.http.patch(f"/jobs/{low}", json=body, timeout=10)
        assert bad.status_code == 422 and bad.json()["detail"][0]["field"] == field
    assert server.http.patch("/jobs/nope", json={"priority": 1}).status_code == 404
    server.http.delete(f"/jobs/{low}", timeout=10)


def test_automl_runs_an_optuna_search_as_time_sliced_jobs(
    tmp_path: Path, stop_after: list[LiveServer]
) -> None:
    server = _server(tmp_path, 2, "time-slicing", 2.0)
    stop_after.append(server)
    out = tmp_path / "automl.json"
    run = subprocess.run(
        [
            *(sys.executable, "-m", "ringleader", "automl", "--trials", "6", "--epochs", "4"),
            *("--examples", "256", "--poll-s", "1", "--json", str(out)),
        ],
        env={**os.environ, "RINGLEADER_URL": server.url},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    result = json.loads(out.read_text())
    assert [t["state"] for t in result["trials"]] == ["succeeded"] * 6
    assert result["seconds_to_target"]["1.5"] is not None
    jobs = server.http.get("/jobs", timeout=10).json()
    events = [e["kind"] for j in jobs for e in server.http.get(f"/jobs/{j['id']}").json()["events"]]
    assert "priority" in events  # the pruner's answers reached the scheduler
    assert "suspend_requested" in events  # six configurations time-sliced on two devices
