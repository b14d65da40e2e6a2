"""Warm starts: a worker forked by the fork server must look exactly like a cold one."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ringleader.policy.model.views import Device
from ringleader.runtime.workers.entry import python_entry
from ringleader.runtime.workers.executor.base import GangStatus
from ringleader.runtime.workers.executor.local import LocalExecutor
from ringleader.runtime.workers.procs import alive, start_ticks

PATH = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])


def test_python_entry_accepts_only_plain_module_and_script_runs() -> None:
    assert python_entry(["python", "-m", "pkg.mod", "--x", "1"], PATH) == (
        "-m",
        "pkg.mod",
        "--x",
        "1",
    )
    assert python_entry([sys.executable, "train.py", "-v"], PATH) == ("train.py", "-v")
    assert python_entry(["python", "-u", "train.py"], PATH) is None
    assert python_entry(["python", "-c", "print(1)"], PATH) is None
    assert python_entry(["python", "-m"], PATH) is None
    assert python_entry(["python"], PATH) is None
    assert python_entry(["sh", "-c", "exit 0"], PATH) is None
    assert python_entry(["no-such-program-here", "x.py"], PATH) is None


def _wait(
    ex: LocalExecutor, job_dir: Path, gen: int, world: int, timeout: float = 30
) -> GangStatus:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = ex.status(job_dir, gen, world)
        if status.finished:
            return status
        time.sleep(0.02)
    raise AssertionError(f"gang still running after {timeout} s: {status}")


def _script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "job.py"
    path.write_text(textwrap.dedent(body))
    return path


def test_warm_worker_gets_the_cold_workers_env_argv_cwd_cores_log_and_exit_code(
    executor: LocalExecutor, tmp_path: Path
) -> None:
    script = _script(
        tmp_path,
        """
        import os, sys
        print("preloaded", "torch" in sys.modules)
        import torch
        print("argv", sys.argv[1:], "rank", os.environ["RANK"], "of", os.environ["WORLD_SIZE"])
        print("extra", os.environ["EXTRA"], "cwd", os.getcwd())
        print("cores", sorted(os.sched_getaffinity(0)), "stdin", sys.stdin.read() == "")
        print("orig_argv", sys.orig_argv[1:])
        sys.exit(3)
        """,
    )
    devices = [Device("local", 0), Device("local", 1)]
    executor.launch("j", tmp_path, 1, ["python", str(script), "--a", "1"], devices, {"EXTRA": "x"})
    status = _wait(executor, tmp_path, 1, 2)
    assert status.exits == {0: 3, 1: 3}
    for rank in (0, 1):
        log = (tmp_path / "logs" / f"rank{rank}.log").read_text()
        assert f"--- generation 1, rank {rank}/2, device local:{rank} ---" in log
        assert "preloaded True" in log, "the worker should have been forked warm"
        assert f"argv ['--a', '1'] rank {rank} of 2" in log
        assert f"extra x cwd {tmp_path}" in log
        assert f"cores {executor.cpus_for(rank)} stdin True" in log
        assert f"orig_argv ['{script}', '--a', '1']" in log


def test_a_crashing_warm_worker_leaves_its_traceback_and_status_1(
    executor: LocalExecutor, tmp_path: Path
) -> None:
    script = _script(tmp_path, "raise RuntimeError('boom in the job')\n")
    executor.launch("j", tmp_path, 1, ["python", str(script)], [Device("local", 0)], {})
    assert _wait(executor, tmp_path, 1, 1).exits == {0: 1}
    log = (tmp_path / "logs" / "rank0.log").read_text()
    assert "Traceback" in log and "RuntimeError: boom in the job" in log


def test_a_missing_script_says_what_python_says_with_no_launcher_frames(
    executor: LocalExecutor, tmp_path: Path
) -> None:
    """As python would: ``can't open file ...`` and status 2, not a FileNotFoundError
    through the fork server's frames (a new user's first ``run -- python train.py``)."""
    gone = tmp_path / "train.py"
    executor.launch("j", tmp_path, 1, ["python", str(gone)], [Device("local", 0)], {})
    assert _wait(executor, tmp_path, 1, 1).exits == {0: 2}
    log = (tmp_path / "logs" / "rank0.log").read_text()
    assert f"can't open file '{gone}': [Errno 2] No such file or directory" in log
    assert "Traceback" not in log and "warm.py" not in log
    cold = subprocess.run([sys.executable, str(gone)], capture_output=True, text=True)
    assert cold.returncode == 2 and "can't open file" in cold.stderr  # the same words


def test_killing_a_warm_gang_kills_the_worker_too(executor: LocalExecutor, tmp_path: Path) -> None:
    script = _script(
        tmp_path,
        """
        import os, time
        open("worker.pid", "w").write(str(os.getpid()))
        time.sleep(600)
        """,
    )
    executor.launch("j", tmp_path, 1, ["python", str(script)], [Device("local", 0)], {})
    deadline = time.monotonic() + 30
    while not (tmp_path / "worker.pid").exists() or not (tmp_path / "worker.pid").read_text():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    worker = int((tmp_path / "worker.pid").read_text())
    executor.kill(tmp_path, 1)
    status = _wait(executor, tmp_path, 1, 1)
    assert status.failed
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{worker}") and _state(worker) != "Z":
        assert time.monotonic() < deadline, "the forked worker survived the kill"
        time.sleep(0.02)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "gone"


def test_other_commands_start_cold(executor: LocalExecutor, tmp_path: Path) -> None:
    server = executor.warm.pid
    executor.launch("j", tmp_path, 1, ["sh", "-c", "echo cold; exit 4"], [Device("local", 0)], {})
    assert _wait(executor, tmp_path, 1, 1).exits == {0: 4}
    assert executor.warm.pid == server
    assert "cold" in (tmp_path / "logs" / "rank0.log").read_text()


def test_a_launch_before_the_server_is_ready_starts_cold(tmp_path: Path) -> None:
    ex = LocalExecutor(gpus=1)  # its fork server needs a second or more to import torch
    try:
        script = _script(tmp_path, 'import sys; print("preloaded", "torch" in sys.modules)\n')
        ex.launch("j", tmp_path, 1, ["python", str(script)], [Device("local", 0)], {})
        assert _wait(ex, tmp_path, 1, 1).exits == {0: 0}
        assert "preloaded False" in (tmp_path / "logs" / "rank0.log").read_text()
    finally:
        ex.warm.close()


def test_the_fork_server_exits_when_its_executor_dies() -> None:
    code = (
        "import os; from ringleader.runtime.workers.executor.local import LocalExecutor\n"
        "ex = LocalExecutor(gpus=2)\n"
        "print(ex.warm.pid, flush=True)\n"
        "os._exit(0)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    pid = int(out.stdout)
    ticks = start_ticks(pid)
    deadline = time.monotonic() + 30  # it finishes importing torch first
    while ticks is not None and alive(pid, ticks):
        assert time.monotonic() < deadline, "the fork server outlived its executor"
        time.sleep(0.05)


def test_another_environments_python_is_not_this_interpreter(tmp_path: Path) -> None:
    # A virtualenv's python links to the same binary but sees other packages.
    other = tmp_path / "venv" / "bin"
    other.mkdir(parents=True)
    (other / "python").symlink_to(sys.executable)
    assert python_entry([str(other / "python"), "x.py"], PATH) is None


def test_a_warm_worker_dies_like_a_cold_one_and_keeps_its_output(
    executor: LocalExecutor, tmp_path: Path
) -> None:
    script = _script(
        tmp_path,
        """
        import os, threading, time

        def late() -> None:
            time.sleep(0.3)
            open("thread-finished", "w").close()

        threading.Thread(target=late).start()  # not a daemon: exit waits for it
        print("before the signal")
        if os.environ["RANK"] == "1":
            os.kill(os.getpid(), 15)
        """,
    )
    devices = [Device("local", 0), Device("local", 1)]
    executor.launch("j", tmp_path, 1, ["python", str(script)], devices, {})
    status = _wait(executor, tmp_path, 1, 2)
    assert status.exits == {0: 0, 1: -15}  # what the cold wrapper records for SIGTERM
    assert (tmp_path / "thread-finished").exists()
    for rank in (0, 1):
        assert "before the signal" in (tmp_path / "logs" / f"rank{rank}.log").read_text()


def test_start_up_environment_the_server_cannot_apply_means_a_cold_start(
    executor: LocalExecutor, tmp_path: Path
) -> None:
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "only_here.py").write_text("VALUE = 42\n")
    script = _script(
        tmp_path,
        'import sys; print("preloaded", "torch" in sys.modules)\n'
        'import only_here; print("value", only_here.VALUE)\n',
    )
    executor.launch(
        "j", tmp_path, 1, ["python", str(script)], [Device("local", 0)], {"PYTHONPATH": str(extra)}
    )
    assert _wait(executor, tmp_path, 1, 1).exits == {0: 0}
    log = (tmp_path / "logs" / "rank0.log").read_text()
    assert "preloaded False" in log and "value 42" in log


def test_a_launch_that_cannot_be_set_up_reports_127(
    executor: LocalExecutor, tmp_path: Path
) -> None:
    from ringleader.runtime.workers.warm import WarmLaunch

    script = _script(tmp_path, "print('never')\n")
    bad = WarmLaunch(
        job_dir=str(tmp_path),
        generation=1,
        rank=0,
        cpus=(4096,),  # no such core: pinning fails in the wrapper
        entry=(str(script),),
        env=dict(os.environ),
        log=str(tmp_path / "logs" / "rank0.log"),
        banner="--- bad ---\n",
    )
    assert executor.warm.send(bad)
    assert _wait(executor, tmp_path, 1, 1).exits == {0: 127}
    # and the server lives on: the next launch still starts warm
    ok = _script(tmp_path, 'import sys; print("preloaded", "torch" in sys.modules)\n')
    executor.launch("j", tmp_path, 2, ["python", str(ok)], [Device("local", 0)], {})
    assert _wait(executor, tmp_path, 2, 1).exits == {0: 0}
    assert "preloaded True" in (tmp_path / "logs" / "rank0.log").read_text()


@pytest.mark.parametrize("ending", ["", "import sys; sys.exit(0)", "raise RuntimeError('x')"])
def test_a_warm_script_keeps_its_globals_to_the_end_as_a_cold_one_does(
    executor: LocalExecutor, tmp_path: Path, ending: str
) -> None:
    # A cold interpreter frees a script's globals only while finalizing; a warm
    # worker that freed them before exiting deadlocked in gloo's teardown of a
    # DDP model (its worker thread waiting for the GIL the freeing thread held).
    # The class lives in a module of its own: defined in the script, its methods
    # would tie the script's globals in a cycle that only the GC frees.
    (tmp_path / "tracked.py").write_text(
        "class Tracked:\n    def __del__(self):\n        print('freed before exit', flush=True)\n"
    )
    script = _script(
        tmp_path,
        f"""
        import sys
        import tracked
        print("preloaded", "torch" in sys.modules)
        held = tracked.Tracked()
        print("script done", flush=True)
        {ending}
        """,
    )
    executor.launch("j", tmp_path, 1, ["python", str(script)], [Device("local", 0)], {})
    _wait(executor, tmp_path, 1, 1)
    log = (tmp_path / "logs" / "rank0.log").read_text()
    assert "preloaded True" in log and "script done" in log
    assert "freed before exit" not in log


def test_another_program_is_execed_by_the_bare_server_as_a_cold_start_would_run_it(
    executor: LocalExecutor, tmp_path: Path
) -> None:
    """``sh -c``: forked by the bare server (no interpreter start of its own), it
    gets the worker's environment, its log, default SIGPIPE, no inherited
    descriptors, and its exit status; a program that does not exist ends 127."""
    job_dir = tmp_path / "job"
    script = (
        'echo "rank=$RANK world=$WORLD_SIZE mine=$MINE"; '
        "grep SigIgn /proc/$$/status; ls /proc/self/fd | sort -n | tr '\\n' ' '; echo; "
        "cat /proc/$PPID/cmdline | tr '\\0' ' '; echo; exit 3"
    )
    executor.launch("sh", job_dir, 1, ["sh", "-c", script], [Device("local", 0)], {"MINE": "yes"})
    status = _wait(executor, job_dir, 1, 1)
    assert status.exits == {0: 3}
    log = (job_dir / "logs" / "rank0.log").read_text().splitlines()
    assert log[1] == "rank=0 world=1 mine=yes"
    ignored = int(log[2].split()[1], 16)
    assert not ignored & (1 << (13 - 1)), log[2]  # SIGPIPE (13) not ignored, as after Popen
    fds = log[3].split()
    assert set(fds) <= {"0", "1", "2", "3"}, fds  # 3: ls's own directory handle
    wrapper = log[4]
    assert "ringleader.runtime.workers.launch --warm --bare" in wrapper, wrapper  # forked, not cold
    executor.launch(
        "none", tmp_path / "none", 1, ["no-such-program-here"], [Device("local", 0)], {}
    )
    assert _wait(executor, tmp_path / "none", 1, 1).exits == {0: 127}
    assert (
        "cannot start 'no-such-program-here'"
        in (tmp_path / "none" / "logs" / "rank0.log").read_text()
    )


TEARDOWN_LOOP = Path(__file__).parent / "data" / "ddp_exit" / "teardown_loop.py"


@pytest.mark.slow
def test_ddp_models_freed_after_their_group_is_destroyed_never_deadlock_a_warm_worker(
    executor: LocalExecutor, tmp_path: Path
) -> None:
    # Unpatched, torch deadlocks in gloo's teardown within a few hundred of these
    # rounds (13-136 of 300 in three cold runs here): runtime/workers/process_groups.py.
    # On every core: pinned to one, gloo's worker thread nearly always takes the
    # GIL before the main thread can, and the race is rarely lost.
    script = _script(
        tmp_path,
        f"""
        import os, runpy, sys
        os.sched_setaffinity(0, range(os.cpu_count()))
        print("preloaded", "torch" in sys.modules, flush=True)
        runpy.run_path({str(TEARDOWN_LOOP)!r}, run_name="__main__")
        """,
    )
    executor.launch("j", tmp_path, 1, ["python", str(script), "300"], [Device("local", 0)], {})
    try:
        status = _wait(executor, tmp_path, 1, 1, timeout=60)
    finally:
        executor.kill(tmp_path, 1)
    log = (tmp_path / "logs" / "rank0.log").read_text()
    assert status.exits == {0: 0}, log
    assert "preloaded True" in log and "300 rounds" in log
