"""Job files stay within their caps, lose no progress record, and follow no link."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

import ringleader.runtime.control.observing as observing_module
from ringleader.job.control import PROGRESS, ProgressReader
from ringleader.policy.catalog import policy_named
from ringleader.runtime.control.config import ControllerConfig
from ringleader.runtime.control.controller import Controller
from ringleader.runtime.state.rows import State
from ringleader.runtime.state.spec import parse_spec
from ringleader.runtime.state.store import Store
from ringleader.runtime.workers.bounded import cap_log, rotated
from ringleader.runtime.workers.executor.local import LocalExecutor

WRITER = """
import os, sys, time
from pathlib import Path
from ringleader.job.control import append_progress
job_dir = Path(os.environ.get("RINGLEADER_JOB_DIR", sys.argv[1]))
for i in range(int(sys.argv[2])):
    append_progress(job_dir, {"g": 1, "step": i + 1, "loss": 0.5, "pad": "x" * 40})
    print(f"line {i}", flush=True)
    time.sleep(0.001)
"""


def test_a_log_held_open_by_its_writer_is_rotated_and_the_newest_lines_stay(
    tmp_path: Path,
) -> None:
    log = tmp_path / "rank0.log"
    with open(log, "ab") as out:  # the worker's stdout, as the executor opens it
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), "3000"], stdout=out)
    rotations = 0
    while writer.poll() is None:
        rotations += cap_log(log, 2048)
        time.sleep(0.01)
    assert writer.returncode == 0 and rotations >= 3
    assert log.stat().st_size <= 2048 + 4096  # one check's worth of growth past the cap
    assert log.read_text().splitlines()[-1] == "line 2999"  # the newest line is in the file
    assert rotated(log).read_text().startswith("line ")


def test_a_link_the_job_planted_is_neither_followed_nor_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("x" * 10_000)
    log = tmp_path / "rank0.log"
    log.symlink_to(victim)
    assert not cap_log(log, 100)
    assert victim.read_text() == "x" * 10_000
    real = tmp_path / "rank1.log"
    real.write_text("y" * 500)
    other = tmp_path / "elsewhere"
    other.write_text("keep")
    rotated(real).symlink_to(other)  # the job points rank1.log.1 at a file of ours
    assert cap_log(real, 100)
    assert other.read_text() == "keep" and not rotated(real).is_symlink()
    assert rotated(real).read_text() == "y" * 500 and real.read_text() == ""


def test_progress_rotated_under_a_live_writer_loses_no_record(tmp_path: Path) -> None:
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(tmp_path), "3000"], stdout=subprocess.DEVNULL
    )
    reader = ProgressReader(tmp_path / PROGRESS)
    steps: list[int] = []
    rotations = 0
    while True:
        done = writer.poll() is not None
        steps += [r["step"] for r in reader.read_new()]
        before = reader.offset
        steps += [r["step"] for r in reader.rotate(4096)]
        rotations += reader.offset == 0 and before > 0
        if done and not reader.read_new():
            break
        time.sleep(0.005)
    assert writer.returncode == 0 and rotations >= 5
    assert steps == list(range(1, 3001)) and reader.bad == 0


def test_the_controller_keeps_a_chatty_job_within_its_caps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(tmp_path / "ringleader.db")
    executor = LocalExecutor(1, warm=False)
    config = ControllerConfig(
        tmp_path, policy_named("fifo"), round_s=1.0, log_cap_bytes=4096, progress_cap_bytes=4096
    )
    controller = Controller(store, executor, config)
    monkeypatch.setattr(observing_module, "LOG_CHECK_S", 0.0)  # check at every tick here
    chatty = ["python", "-c", WRITER, "-", "2000"]
    job = store.add(parse_spec({"name": "chatty", "command": chatty}))
    deadline = time.monotonic() + 120
    sizes = []
    while time.monotonic() < deadline:
        controller.tick()
        row = store.get(job.id)
        assert row is not None
        d = controller.job_dir(job.id)
        if (d / PROGRESS).exists():
            sizes.append((d / PROGRESS).stat().st_size)
        if row.state.finished:
            break
        time.sleep(0.05)
    row = store.get(job.id)
    assert row is not None and row.state is State.SUCCEEDED
    d = controller.job_dir(job.id)
    log = d / "logs" / "rank0.log"
    assert rotated(log).exists() and log.stat().st_size < 64 << 10
    assert rotated(d / PROGRESS).exists() and max(sizes) < 64 << 10
    # The controller read every record, across every rotation.
    assert row.step == 2000
    newest = d / PROGRESS if (d / PROGRESS).exists() else rotated(d / PROGRESS)
    assert json.loads(newest.read_text().splitlines()[-1])["step"] == 2000
    executor.warm.close()
    store.close()
