"""Warm starts: a fork server that imported torch before any job existed.

Starting Python and importing torch is most of a resize here (2–2.4 s of
2.2–3.7 s). The local executor keeps one process that has paid for it in
advance and forks, per worker, a launch wrapper that is what a cold launch
would have made — its own session, the same pid and exit files, CPU pinning,
log and environment — and that forks the worker, which runs the job's Python
module or script in-process, imports already done. A fork costs milliseconds
and no CPU while jobs run, so nothing competes with the jobs it starts (an
earlier design kept idle wrappers and re-imported torch after every launch;
that import skewed the speeds the packing policy measured). Only commands
that run this interpreter on a module (``python -m pkg.mod ...``) or a script
(``python train.py ...``) can start warm; anything else starts cold.

The server exits when its stdin closes (its executor went away); wrappers it
forked live on in their own sessions, like cold ones.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import os
import runpy
import shutil
import signal
import sys
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, NoReturn

from ringleader.runtime.procs import start_ticks

PRELOAD: tuple[str, ...] = ("torch", "torch.nn", "torch.distributed", "ringleader.job")
"""Imported while waiting: what the workers we launch spend their start-up on."""

READY = b"ready\n"


@dataclass(frozen=True, slots=True)
class WarmLaunch:
    """One worker's launch, as the executor sends it to the fork server."""

    job_dir: str
    generation: int
    rank: int
    cpus: tuple[int, ...]
    entry: tuple[str, ...]
    """``("-m", module, *args)`` or ``(script, *args)``: see ``python_entry``."""
    env: Mapping[str, str]
    log: str
    banner: str

    def to_line(self) -> bytes:
        return json.dumps(asdict(self)).encode() + b"\n"

    @classmethod
    def from_line(cls, line: bytes) -> WarmLaunch:
        raw = json.loads(line)
        raw["cpus"] = tuple(raw["cpus"])
        raw["entry"] = tuple(raw["entry"])
        return cls(**raw)


def python_entry(command: Sequence[str], path: str) -> tuple[str, ...] | None:
    """What follows the interpreter in ``command``, if it runs this interpreter plainly.

    ``python -m mod args`` gives ``("-m", "mod", *args)``; ``python x.py args``
    gives ``("x.py", *args)``. Interpreter options (``-u``, ``-X ...``, ``-c``)
    or another program give None: those start cold.
    """
    if len(command) < 2:
        return None
    found = shutil.which(command[0], path=path)
    if found is None or not _same_file(found, sys.executable):
        return None
    rest = tuple(command[1:])
    if rest[0] == "-m":
        return rest if len(rest) >= 2 and not rest[1].startswith("-") else None
    return None if rest[0].startswith("-") else rest


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def preload() -> None:
    """Import what workers need; a missing optional package only makes the start colder.

    Building a first optimizer imports another second's worth of torch
    (``torch._dynamo`` and what it needs) on first use, so do that too, on a
    throwaway tensor: it starts no threads, which matters because we fork next.
    """
    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)


def serve(stdin: IO[bytes], ready: IO[bytes]) -> int:
    """The fork server: preload, say so on ``ready``, fork a wrapper per launch line.

    Everything happens on the main thread: a child forked from a process
    whose other threads touched torch's allocators can hang in them.
    """
    preload()
    with contextlib.suppress(OSError, ValueError):
        ready.write(READY)
        ready.flush()
    # Forked wrappers are reaped by the kernel; each restores SIGCHLD for its own worker.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    for line in stdin:
        if not line.strip():
            continue
        launch = WarmLaunch.from_line(line)
        if os.fork() == 0:
            code = 1
            try:
                code = _wrap(launch)  # which points fds 0-2 elsewhere
            except BaseException:  # never fall back into the server's loop
                traceback.print_exc()
            finally:
                os._exit(code)
    return 0


def _wrap(launch: WarmLaunch) -> int:
    """In a forked child of the server: be the launch wrapper of one worker."""
    from ringleader.runtime.launch import die_with_parent, run_dir, write_atomic

    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    _take_over_stdio(launch)
    here = run_dir(Path(launch.job_dir), launch.generation)
    here.mkdir(parents=True, exist_ok=True)
    pid = os.getpid()
    write_atomic(here / f"rank{launch.rank}.pid", f"{pid} {start_ticks(pid)}\n")
    if launch.cpus:
        os.sched_setaffinity(0, set(launch.cpus))
    child = os.fork()
    if child == 0:
        die_with_parent()
        _run(launch)

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    _, status = os.waitpid(child, 0)
    code = os.waitstatus_to_exitcode(status)
    write_atomic(here / f"rank{launch.rank}.exit", f"{code}\n")
    return 0 if code == 0 else 1


def _take_over_stdio(launch: WarmLaunch) -> None:
    """Point fds 0, 1, 2 where a cold worker's would be: nothing in, its rank's log out."""
    log_path = Path(launch.log)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.write(log, launch.banner.encode())
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(null)
    os.close(log)
    # The server's stdin object may hold launch lines it read ahead; a fresh one
    # on the new fd 0 cannot hand them to the worker.
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 - lives as long as we do
    os.chdir(launch.job_dir)


def _run(launch: WarmLaunch) -> NoReturn:
    """In the forked child: become ``python <entry>`` and never return to the wrapper."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.environ.clear()
    os.environ.update(launch.env)
    code = 0
    try:
        entry = launch.entry
        if entry[0] == "-m":
            sys.argv = [entry[1], *entry[2:]]
            sys.path[0] = os.getcwd()
            runpy.run_module(entry[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(entry)
            sys.path[0] = os.path.dirname(os.path.abspath(entry[0]))
            runpy.run_path(entry[0], run_name="__main__")
    except SystemExit as stop:
        code = _exit_code(stop.code)
    except BaseException:  # what the interpreter would print, and its status
        traceback.print_exc()
        code = 1
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    with contextlib.suppress(BaseException):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def _exit_code(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1
