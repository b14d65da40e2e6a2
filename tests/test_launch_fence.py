"""A generation the controller killed stays dead: a rank of it that starts later
(a cold start slower than a restarted controller's patience) runs nothing."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ringleader.policy.model.views import Device
from ringleader.runtime.workers.executor.base import GangStatus
from ringleader.runtime.workers.executor.local import LocalExecutor
from ringleader.runtime.workers.wrapper import ABANDONED, abandon, run_dir

ONE = [Device("local", 0)]


def _wait(ex: LocalExecutor, job_dir: Path, gen: int, timeout: float = 30) -> GangStatus:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = ex.status(job_dir, gen, 1)
        if status.finished:
            return status
        time.sleep(0.02)
    raise AssertionError(f"gang still running after {timeout} s: {status}")


def _commands(tmp_path: Path) -> dict[str, list[str]]:
    script = tmp_path / "job.py"
    script.write_text("import sys; open(sys.argv[1], 'w').write('ran')\n")
    return {
        "python": ["python", str(script), str(tmp_path / "ran")],  # the warm fork server
        "program": ["sh", "-c", f"echo ran > {tmp_path / 'ran'}"],  # the bare one
    }


@pytest.mark.parametrize("what", ["python", "program"])
def test_a_rank_launched_after_its_generation_was_killed_runs_nothing(
    executor: LocalExecutor, tmp_path: Path, what: str
) -> None:
    command = _commands(tmp_path)[what]
    executor.kill(tmp_path, 1)  # given up before any rank said it started
    executor.launch("j", tmp_path, 1, command, ONE, {})
    assert _wait(executor, tmp_path, 1).exits == {0: 137}
    assert not (tmp_path / "ran").exists()
    assert "given up before it started" in (tmp_path / "logs" / "rank0.log").read_text()
    # The fence is the generation's: the job's next launch runs.
    executor.launch("j", tmp_path, 2, command, ONE, {})
    assert _wait(executor, tmp_path, 2).exits == {0: 0}
    assert (tmp_path / "ran").exists()


def test_a_cold_rank_launched_after_its_generation_was_killed_runs_nothing(
    tmp_path: Path,
) -> None:
    ex = LocalExecutor(gpus=1, warm=False)
    try:
        ex.kill(tmp_path, 1)
        ex.launch("j", tmp_path, 1, _commands(tmp_path)["python"], ONE, {})
        assert _wait(ex, tmp_path, 1).exits == {0: 137}
        assert not (tmp_path / "ran").exists()
    finally:
        ex.close()


def test_the_mark_follows_no_link_a_job_left_in_its_directory(tmp_path: Path) -> None:
    job_dir, elsewhere = tmp_path / "job", tmp_path / "elsewhere"
    job_dir.mkdir()
    elsewhere.mkdir()
    (job_dir / "run").symlink_to(elsewhere)
    abandon(job_dir, 1)
    assert list(elsewhere.iterdir()) == []
    os.unlink(job_dir / "run")
    (job_dir / "run").mkdir()
    run_dir(job_dir, 2).mkdir()
    (run_dir(job_dir, 2) / ABANDONED).symlink_to(elsewhere / "target")
    abandon(job_dir, 2)
    assert list(elsewhere.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="hands directories to another uid: needs root")
def test_directories_the_mark_makes_belong_to_the_jobs_owner(tmp_path: Path) -> None:
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    os.chown(job_dir, 65534, 65534)
    abandon(job_dir, 3)
    assert (job_dir / "run").stat().st_uid == 65534
    assert run_dir(job_dir, 3).stat().st_uid == 65534
    assert (run_dir(job_dir, 3) / ABANDONED).exists()
