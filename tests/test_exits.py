"""The exit watch: a process's end wakes the controller, not its next half-second look."""

from __future__ import annotations

import subprocess
import threading
import time

import pytest

from ringleader.runtime.workers.exits import ExitWatch
from ringleader.runtime.workers.procs import start_ticks


def _started(seconds: float) -> tuple[subprocess.Popen[bytes], int]:
    proc = subprocess.Popen(["sleep", str(seconds)])
    ticks = start_ticks(proc.pid)
    assert ticks is not None
    return proc, ticks


def test_an_exit_wakes_the_watcher_and_the_process_is_no_longer_running() -> None:
    watch = ExitWatch()
    if not watch.available:
        pytest.skip("no pidfd_open on this kernel: the controller's tick sees exits")
    woken = threading.Event()
    watch.on_exit(woken.set)
    proc, ticks = _started(0.3)
    watch.watch(proc.pid, ticks)
    watch.watch(proc.pid, ticks)  # twice: still one watch
    assert watch.watching() == 1
    assert watch.running(proc.pid, ticks)
    assert not woken.is_set()
    assert woken.wait(5), "the exit did not wake the watcher"
    assert not watch.running(proc.pid, ticks)
    assert watch.watching() == 0
    proc.wait()  # the watch never reaped it: its parent still can


def test_a_process_already_gone_or_a_reused_pid_is_not_watched() -> None:
    watch = ExitWatch()
    if not watch.available:
        pytest.skip("no pidfd_open on this kernel")
    watch.on_exit(lambda: None)
    proc, ticks = _started(30)
    watch.watch(proc.pid, ticks + 1)  # the pid now names another process than asked
    assert watch.watching() == 0
    proc.kill()
    proc.wait()
    watch.watch(proc.pid, ticks)  # gone
    assert watch.watching() == 0


def test_a_watch_nobody_listens_to_holds_nothing() -> None:
    watch = ExitWatch()
    proc, ticks = _started(30)
    try:
        watch.watch(proc.pid, ticks)
        assert watch.watching() == 0
        assert not watch.running(proc.pid, ticks)
    finally:
        proc.kill()
        proc.wait()


def test_the_executor_sees_a_gang_end_after_caching_it_running(tmp_path: object) -> None:
    """``status`` skips the files of a gang all running; an exit must still show."""
    from pathlib import Path

    from ringleader.policy.model.views import Device
    from ringleader.runtime.workers.executor.local import LocalExecutor
    from ringleader.runtime.workers.gpus import NODE

    job_dir = Path(str(tmp_path)) / "job"
    executor = LocalExecutor(gpus=2, warm=False)
    woken = threading.Event()
    executor.on_exit(woken.set)
    try:
        executor.launch("j", job_dir, 1, ["sleep", "1"], [Device(NODE, 0), Device(NODE, 1)], {})
        deadline = time.monotonic() + 20
        while executor.status(job_dir, 1, 2).alive < 2:
            assert time.monotonic() < deadline, "the gang did not start"
            time.sleep(0.02)
        assert executor.status(job_dir, 1, 2).alive == 2  # from the cache now
        assert woken.wait(20), "the gang's end did not wake anyone"
        deadline = time.monotonic() + 20
        while not (status := executor.status(job_dir, 1, 2)).finished:
            assert time.monotonic() < deadline, "the gang's end was not seen"
            time.sleep(0.02)
        assert status.exits == {0: 0, 1: 0}
    finally:
        executor.close()
