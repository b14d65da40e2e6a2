"""Warm workers: launch wrappers that have imported torch before their job exists.

Starting Python and importing torch is most of a resize here (1.8 s of 2.2 s).
The local executor keeps a few wrappers that paid for it in advance. Each
waits on its stdin for one worker's launch (a JSON line), then becomes what a
cold launch would have made — the same pid and exit files, CPU pinning, log,
environment and process group — and forks a child that runs the job's Python
module or script in-process, imports already done. Only commands that run
this interpreter on a module (``python -m pkg.mod ...``) or a script
(``python train.py ...``) can use one; anything else starts cold.

A wrapper whose executor goes away (its stdin closes) before it gets a job
exits, so an idle pool never outlives the server.
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
    """One worker's launch, as the executor sends it to a warm wrapper."""

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
    """The warm wrapper: preload, say so on ``ready``, run the launch from ``stdin``.

    Everything happens on the main thread: we fork later, and a child forked
    from a process whose other threads touched torch's allocators can hang
    in them. The executor writes our pid file when it hands us a launch, so
    a launch that waits for our imports is not a silent one. Returns the
    wrapper's exit status.
    """
    from ringleader.runtime.launch import die_with_parent, run_dir, write_atomic

    preload()
    with contextlib.suppress(OSError, ValueError):
        ready.write(READY)
        ready.flush()
    line = stdin.readline()
    if not line.strip():
        return 0  # the executor went away before it needed us
    launch = WarmLaunch.from_line(line)
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
