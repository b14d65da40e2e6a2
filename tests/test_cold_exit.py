"""A cold Python worker ends an unchanged DDP script as a warm one does (``workers._site``).

Under load, a gloo thread that frees a job's last all-reduce as the
interpreter finalizes aborts the rank (``terminate called without an active
exception``, status -6): two exits in 17 on the Slurm lab beside three busy
loops. Every worker's ``PYTHONPATH`` starts with a ``sitecustomize`` that
gives such threads the GIL first, and keeps destroyed process groups.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import threading
from pathlib import Path

from ringleader.runtime.workers.entry import SITE, python_path
from ringleader.runtime.workers.executor.local import WorkerLaunch, worker_env
from ringleader.runtime.workers.gil_waiters import foreign_states

GIL_AT_EXIT = Path(__file__).parent / "data" / "ddp_exit" / "gil_at_exit.py"


def _python(code_or_script: list[str], pythonpath: str | None, cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    done = subprocess.run(
        [sys.executable, *code_or_script],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_native_thread_that_wants_the_gil_as_the_script_ends_gets_it_first(
    tmp_path: Path,
) -> None:
    bare, served = tmp_path / "bare", tmp_path / "served"
    _python([str(GIL_AT_EXIT), str(bare)], None, tmp_path)
    _python([str(GIL_AT_EXIT), str(served)], python_path(None), tmp_path)
    assert not bare.exists()  # the race is real: finalized before the thread had the GIL
    assert served.read_text() == "ran\n"


def test_every_worker_starts_with_the_site_directory_before_the_specs_path(
    tmp_path: Path,
) -> None:
    launch = WorkerLaunch("j", tmp_path, 1, 0, 1, "127.0.0.1", 29500, cuda=False, cuda_visible="")
    assert worker_env(launch, {})["PYTHONPATH"] == str(SITE)
    given = worker_env(launch, {"PYTHONPATH": "/opt/lib"})["PYTHONPATH"]
    assert given.split(os.pathsep) == [str(SITE), "/opt/lib"]


def test_a_cold_python_keeps_destroyed_groups_and_still_runs_the_sitecustomize_it_shadows(
    tmp_path: Path,
) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text("MINE = True\n")
    code = (
        "import sys\n"
        "import torch.distributed as dist\n"
        "print(getattr(dist.destroy_process_group, '__ringleader_keeps_groups__', False))\n"
        "print(getattr(sys.modules.get('sitecustomize'), 'MINE', False))\n"
        f"print({str(SITE)!r} in sys.path)\n"
    )
    shown = _python(["-c", code], python_path(str(theirs)), tmp_path).split()
    assert shown == ["True", "True", "False"]
    plain = _python(["-c", code], None, tmp_path).split()
    assert plain[0] == "False"  # torch's own without it


def test_a_thread_state_no_python_thread_owns_is_counted_and_python_threads_are_not() -> None:
    api = ctypes.pythonapi
    api.PyInterpreterState_Get.restype = ctypes.c_void_p
    api.PyThreadState_New.restype = ctypes.c_void_p
    api.PyThreadState_New.argtypes = [ctypes.c_void_p]
    api.PyThreadState_Clear.argtypes = [ctypes.c_void_p]
    api.PyThreadState_Delete.argtypes = [ctypes.c_void_p]
    release = threading.Event()
    python_thread = threading.Thread(target=release.wait)
    python_thread.start()
    try:
        assert foreign_states() == 0
        native = api.PyThreadState_New(api.PyInterpreterState_Get())
        try:
            assert foreign_states() == 1
        finally:
            api.PyThreadState_Clear(native)
            api.PyThreadState_Delete(native)
        assert foreign_states() == 0
    finally:
        release.set()
        python_thread.join()
