"""The runtime for real: a server process, real workers, real torch.distributed (gloo)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.live_server import LiveServer, rank0_worker_pid, run_cli, tiny_job, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = LiveServer(tmp_path_factory.mktemp("server")).start()
    yield live
    live.stop()
    live.kill_workers()


def cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(url, *args, timeout=60)


def steps_and_generations(progress: list[dict[str, object]]) -> tuple[list[int], list[int]]:
    recs = [r for r in progress if "loss" in r]
    return [int(str(r["step"])) for r in recs], [int(str(r["g"])) for r in recs]


def test_submit_then_list_and_show_as_json(server: LiveServer, tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "name: one-shot\n"
        "command: python -m ringleader.workloads.resnet --depth 8 --image-size 8 --batch 16 "
        "--examples-per-epoch 128 --epochs 1\n"
        "gpus: 1\nepochs: 1\n"
    )
    out = cli(server.url, "submit", str(spec))
    assert out.returncode == 0, out.stderr
    job_id = out.stdout.strip()
    done = server.wait_state(job_id, {"succeeded", "failed"})
    assert done["state"] == "succeeded", done["error"]
    listed = cli(server.url, "jobs", "--json")
    row = next(r for r in __import__("json").loads(listed.stdout) if r["id"] == job_id)
    for key in ("id", "name", "state", "gpus", "step", "submitted_at", "finished_at"):
        assert key in row
    assert row["step"] == 8  # 128 examples / 16 per step
    shown = __import__("json").loads(cli(server.url, "show", job_id, "--json").stdout)
    assert [e["kind"] for e in shown["events"]][:2] == ["submitted", "launched"]


BAD_SPECS = [
    ({"name": "x", "command": ["true"], "gpus": -1}, "gpus"),
    ({"name": "x", "command": ["true"], "gpus": 999}, "gpus"),
    ({"name": "x", "command": ["true"], "colour": "red"}, "colour"),
    ({"name": "x", "command": ["true"], "gpus": "two"}, "gpus"),
    ({"name": "x", "command": []}, "command"),
    ({"name": "x y", "command": ["true"]}, "name"),
    ({"command": ["true"]}, "name"),
    ({"name": "x", "command": ["true"], "elastic": True, "min_gpus": 4, "max_gpus": 2}, "(spec)"),
    ({"name": "x", "command": ["python", "-c", "print(1)\x00"]}, "command"),
    ({"name": "x", "command": [""]}, "command[0]"),
    ({"name": "x", "command": ["true"], "env": {"A": "b\x00"}}, "env"),
]


@pytest.mark.parametrize(("spec", "field"), BAD_SPECS)
def test_bad_specs_get_422_naming_the_field(
    server: LiveServer, spec: dict[str, object], field: str
) -> None:
    r = server.http.post("/jobs", json=spec, timeout=10)
    assert r.status_code == 422
    assert field in {d["field"] for d in r.json()["detail"]}, r.json()


def test_garbage_bodies_get_422_and_the_server_keeps_serving(server: LiveServer) -> None:
    garbage = (
        b"\xff" * (1 << 20),
        b"{not json",
        b"[1, 2, 3]",
        os.urandom(4096),
        b"[" * 100_000,
        b" " * (8 << 20),
    )
    for body in garbage:
        r = server.http.post(
            "/jobs",
            content=body,
            headers={"Content-Type": "application/json"},
            timeout=30,
        )
        assert r.status_code == 422, r.text[:200]
    # (A job that exists: the id is resolved, as the caller's own, before the query.)
    job = server.submit({"name": "rank-check", "command": ["true"]})
    r = server.http.get(f"/jobs/{job}/logs", params={"rank": "abc"}, timeout=5)
    assert r.status_code == 422 and r.json()["detail"][0]["field"] == "rank", r.text
    assert server.http.get("/health", timeout=5).json()["ok"]


def test_cli_rejects_a_bad_spec_file_with_exit_2(server: LiveServer, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ncommand: [true]\ngpus: -3\n")
    out = cli(server.url, "submit", str(bad))
    assert out.returncode == 2 and "gpus" in out.stderr and "Traceback" not in out.stderr
    big = cli(server.url, "submit", str(tmp_path / "missing.yaml"))
    assert big.returncode == 2


def test_an_elastic_job_is_resized_and_its_training_continues(server: LiveServer) -> None:
    first = server.submit(tiny_job("grow", epochs=40, elastic=True, max_gpus=4))
    wait_for(
        lambda: server.job(first)["gpus"] == 4 and server.job(first)["step"] > 3,
        60,
        "the first job to run on all 4 devices",
    )
    second = server.submit(tiny_job("arrive", epochs=10, elastic=True, max_gpus=4))
    for job_id in (first, second):
        assert server.wait_state(job_id, {"succeeded", "failed"}, 240)["state"] == "succeeded"
    job = server.job(first)
    assert job["resizes"] >= 1
    progress = server.progress(first)
    steps, gens = steps_and_generations(progress)
    assert steps == sorted(steps) and len(set(steps)) == len(steps)  # never goes back
    assert gens == sorted(gens)  # generations never interleave: no two copies at once
    for rec in (r for r in progress if "loss" in r):
        assert rec["lr"] == pytest.approx(0.1 * 16 / 128 * int(rec["world_size"]))
    starts = [r for r in progress if r.get("event") == "started"]
    stops = [r for r in progress if r.get("event") == "stopped"]
    assert len(starts) >= 2
    for stop, start in zip(stops, starts[1:], strict=False):
        assert start["restored_step"] == stop["step"]  # resumed exactly where it stopped


def test_a_failing_command_is_retried_then_failed_with_its_log(server: LiveServer) -> None:
    spec = {
        "name": "boom",
        "command": ["python", "-c", "import sys; print('it went boom'); sys.exit(3)"],
        "retries": 1,
    }
    job = server.wait_state(server.submit(spec), {"failed", "succeeded"}, 60)
    assert job["state"] == "failed"
    assert job["attempts"] == 2
    assert "it went boom" in job["error"] and "rank 0 exit 3" in job["error"]
    assert job["reason"] == "it went boom"  # the listing's why: the last line it wrote
    listed = cli(server.url, "jobs", "--state", "failed")
    assert "it went boom" in listed.stdout, listed.stdout


def test_cancel_stops_a_running_job(server: LiveServer) -> None:
    job_id = server.submit(tiny_job("long", epochs=500, gpus=1))
    wait_for(lambda: server.job(job_id)["step"] > 2, 60, "the job to make progress")
    out = cli(server.url, "cancel", job_id)
    assert out.returncode == 0
    assert server.wait_state(job_id, {"cancelled", "failed"}, 60)["state"] == "cancelled"


def test_a_killed_worker_restarts_from_its_last_checkpoint(server: LiveServer) -> None:
    job_id = server.submit(tiny_job("victim", epochs=30, ckpt=1.0, gpus=2, retries=2))
    checkpoints = server.state_dir / "jobs" / job_id / "checkpoints"
    wait_for(
        lambda: server.job(job_id)["step"] > 20 and any(checkpoints.glob("ckpt-*")),
        90,
        "progress and a checkpoint before the kill",
    )
    before = server.job(job_id)
    os.kill(
        rank0_worker_pid(server.state_dir, job_id, before["events"][-1]["generation"]),
        signal.SIGKILL,
    )
    job = server.wait_state(job_id, {"succeeded", "failed"}, 240)
    assert job["state"] == "succeeded", job["error"]
    assert job["attempts"] == 1
    progress = server.progress(job_id)
    starts = [r for r in progress if r.get("event") == "started"]
    restored = starts[1]["restored_step"]
    steps, _ = steps_and_generations(progress)
    first_run = {r["step"]: r["t"] for r in progress if "loss" in r and r["g"] == 1}
    last_before = max(first_run)
    assert restored is not None and restored <= last_before
    # At most one checkpoint interval (1 s) of work is lost, plus the step and
    # the checkpoint write that were under way. Measured in time, not steps:
    # a tiny step takes 15-60 ms depending on load and on warm starts.
    lost_s = first_run[last_before] - first_run[restored]
    assert lost_s <= 1.0 + 1.5, (restored, last_before, lost_s)
    assert steps[-1] == 30 * 256 // (16 * 2)


def test_server_kill9_and_restart_loses_nothing(tmp_path: Path) -> None:
    live = LiveServer(tmp_path / "state").start()
    try:
        ids = [
            live.submit(tiny_job(f"survivor{i}", epochs=25, elastic=True, max_gpus=2))
            for i in range(3)
        ]
        wait_for(
            lambda: sum(live.job(i)["state"] == "running" for i in ids) >= 2, 60, "jobs running"
        )
        # Marked running at launch; their processes say so once started (pid files).
        wait_for(
            lambda: len(list(live.state_dir.glob("jobs/*/run/*/rank*.pid"))) >= 2,
            60,
            "the workers to start",
        )
        live.kill9()
        running_pids = list(live.state_dir.glob("jobs/*/run/*/rank*.pid"))
        assert running_pids  # workers outlive the server
        restarted = LiveServer(live.state_dir, round_s=2.0)
        restarted.port, restarted.url = live.port, live.url
        restarted.start()
        live = restarted
        deadline = time.monotonic() + 240  # within pytest's 300 s, so the log is printed
        for job_id in ids:
            left = max(deadline - time.monotonic(), 1.0)
            job = live.wait_state(job_id, {"succeeded", "failed", "cancelled"}, left)
            assert job["state"] == "succeeded", job["error"]
            steps, gens = steps_and_generations(live.progress(job_id))
            assert steps == sorted(steps) and len(set(steps)) == len(steps)
            assert gens == sorted(gens)
        assert len(live.http.get("/jobs", timeout=5).json()) == 3
    finally:
        live.stop()
        live.kill_workers()


def test_an_old_database_gains_the_new_columns(tmp_path: Path) -> None:
    import sqlite3

    from ringleader.runtime.state.spec import parse_spec
    from ringleader.runtime.state.store import Store

    db = tmp_path / "old.db"
    old = sqlite3.connect(db)
    old.execute(
        "CREATE TABLE jobs (id TEXT PRIMARY KEY, seq INTEGER NOT NULL, spec TEXT NOT NULL, "
        "state TEXT NOT NULL, submitted_at REAL NOT NULL, started_at REAL, finished_at REAL, "
        "step INTEGER NOT NULL DEFAULT 0, epoch REAL NOT NULL DEFAULT 0, loss REAL, "
        "workers INTEGER NOT NULL DEFAULT 0, devices TEXT NOT NULL DEFAULT '[]', "
        "generation INTEGER NOT NULL DEFAULT 0, attempts INTEGER NOT NULL DEFAULT 0, "
        "error TEXT, stopping TEXT, cancel_requested INTEGER NOT NULL DEFAULT 0, "
        "progress_offset INTEGER NOT NULL DEFAULT 0, observations TEXT NOT NULL DEFAULT '{}', "
        "shape TEXT NOT NULL DEFAULT '{}', resizes INTEGER NOT NULL DEFAULT 0)"
    )
    old.commit()
    old.close()
    store = Store(db)
    row = store.add(parse_spec({"name": "x", "command": ["true"]}))
    row.attained_gpu_s = 12.5
    store.save(row)
    again = store.get(row.id)
    assert again is not None and again.attained_gpu_s == 12.5
    store.close()
