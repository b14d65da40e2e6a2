"""Warm starts: a fork server that imported torch before any job existed.

Starting Python and importing torch is most of a cold resize here (2.4–2.7 s
of 2.8–3.8 s; ``bench/resize.py``). The local executor keeps one process that has paid for it in
advance and forks, per worker, a launch wrapper that is what a cold launch
would have made — its own session, the same pid and exit files, CPU pinning,
log and environment — and that forks the worker, which runs the job's Python
module or script in-process, imports already done. A fork costs milliseconds
and no CPU while jobs run, so nothing competes with the jobs it starts (an
earlier design kept idle wrappers and re-imported torch after every launch;
that import skewed the speeds the packing policy measured). A command that
runs this interpreter on a module (``python -m pkg.mod ...``) or a script
(``python train.py ...``) runs in the forked worker if its environment
agrees with the server's on what is read at start-up (else it starts cold);
any other program (``sh -c ...``, ``torchrun``) is ``exec``-ed by the forked
worker, which spares it the cold wrapper's interpreter start.

The server exits when its stdin closes (its executor went away); wrappers it
forked live on in their own sessions, like cold ones.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import io
import json
import os
import runpy
import signal
import sys
import threading
import traceback
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, NoReturn

from ringleader.runtime.workers.entry import interpreter_first, missing_script, python_path
from ringleader.runtime.workers.identity import become
from ringleader.runtime.workers.process_groups import keep_destroyed_groups
from ringleader.runtime.workers.wrapper import (
    die_with_parent,
    log_to,
    publish_pid,
    record_exit,
    run_dir,
    write_atomic,
)

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
    """``("-m", module, *args)`` or ``(script, *args)``: see ``python_entry``;
    empty when the worker ``execs`` another program."""
    env: Mapping[str, str]
    log: str
    banner: str
    workdir: str = ""
    """Where the command runs; empty: the job directory."""
    uid: int | None = None
    """Run as this user (``ringleader.runtime.workers.identity``); None: as the server."""
    execs: tuple[str, ...] = ()
    """A command that is not this interpreter (``sh -c ...``, a binary): the forked
    worker replaces itself with it, as a cold wrapper's ``Popen`` would start it,
    without the cold wrapper's own interpreter start (tens of milliseconds of CPU
    per launch, most of a short job's handover)."""

    def to_line(self) -> bytes:
        return json.dumps(asdict(self)).encode() + b"\n"

    @classmethod
    def from_line(cls, line: bytes) -> WarmLaunch:
        raw = json.loads(line)
        raw["cpus"] = tuple(raw["cpus"])
        raw["entry"] = tuple(raw["entry"])
        raw["execs"] = tuple(raw.get("execs", ()))
        return cls(**raw)


KEPT_FROM_SERVER: tuple[str, ...] = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR")
"""All a job inherits of the server's environment: the server's own may hold
secrets (cloud keys, database passwords) that no job, and no job's log, should see."""


def clean_env() -> dict[str, str]:
    """The environment every job starts from: a few neutral variables, ``python`` first on PATH.

    The spec's ``env`` and the scheduler's variables are laid over it.
    """
    kept = {k: os.environ[k] for k in KEPT_FROM_SERVER if k in os.environ}
    kept["PATH"] = interpreter_first(kept.get("PATH", "/usr/local/bin:/usr/bin:/bin"))
    kept["PYTHONPATH"] = python_path(None)
    kept.setdefault("LANG", "C.UTF-8")
    return kept


STARTUP_PREFIXES: tuple[str, ...] = (
    "PYTHON",
    "OMP_",
    "KMP_",
    "GOMP_",
    "MKL_",
    "OPENBLAS_",
    "TORCH",
    "LD_",
    "MALLOC_",
)
"""Variables read when the interpreter or torch's libraries start, i.e. in the
server, before a worker's environment exists."""
EMULATED: frozenset[str] = frozenset({"PYTHONUNBUFFERED", "OMP_NUM_THREADS"})
"""Of those, the ones ``_run`` applies by hand."""


RUN_TIME_PREFIXES: tuple[str, ...] = ("TORCHELASTIC_",)
"""Of those prefixes, variables read only when called (torchrun's contract), not at import."""


def startup_env(env: Mapping[str, str]) -> dict[str, str]:
    """The part of ``env`` a warm start cannot change: a worker whose differs
    from the server's must start cold."""
    return {
        k: v
        for k, v in env.items()
        if k.startswith(STARTUP_PREFIXES)
        and k not in EMULATED
        and not k.startswith(RUN_TIME_PREFIXES)
    }


def _preload() -> None:
    """Import what workers need; a missing optional package only makes the start colder.

    Building a first optimizer imports another second's worth of torch
    (``torch._dynamo`` and what it needs) on first use, so do that too, on a
    throwaway tensor. No Python thread runs when we fork; torch's OpenBLAS
    keeps a native thread, which registers fork handlers of its own.
    """
    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)


def serve(stdin: IO[bytes], ready: IO[bytes], *, preload: bool = True) -> int:
    """The fork server: preload, say so on ``ready``, fork a wrapper per launch line.

    Everything happens on the main thread: a child forked from a process
    whose other threads touched torch's allocators can hang in them.
    ``preload`` False: a bare server for workers that ``exec`` another
    program; forking it costs a fifth of a millisecond where forking one
    that holds torch costs about 5 ms (twice per worker: wrapper and worker).
    """
    if preload:
        _preload()
    with contextlib.suppress(OSError, ValueError):
        ready.write(READY)
        ready.flush()
    # Forked wrappers are reaped by the kernel; each restores SIGCHLD for its own worker.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    for line in stdin:
        if not line.strip():
            continue
        try:
            launch = WarmLaunch.from_line(line)
        except (ValueError, TypeError, KeyError):
            traceback.print_exc()  # the controller's start timeout relaunches it
            continue
        try:
            child = os.fork()
        except OSError:
            _could_not_start(launch)
            continue
        if child == 0:
            code = 127
            try:
                code = _wrap(launch)  # which points fds 0-2 elsewhere
            except BaseException:  # never fall back into the server's loop
                traceback.print_exc()
                _could_not_start(launch)
            finally:
                os._exit(code)
    return 0


def _could_not_start(launch: WarmLaunch) -> None:
    """Record exit status 127 (as a shell does), so the controller sees a failed start."""
    with contextlib.suppress(OSError):
        here = run_dir(Path(launch.job_dir), launch.generation)
        here.mkdir(parents=True, exist_ok=True)
        if not (here / f"rank{launch.rank}.exit").exists():
            write_atomic(here / f"rank{launch.rank}.exit", "127\n")


def _wrap(launch: WarmLaunch) -> int:
    """In a forked child of the server: be the launch wrapper of one worker."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    if launch.uid is not None:
        become(launch.uid)  # before anything in the job's directory is touched
    _take_over_stdio(launch)
    here = run_dir(Path(launch.job_dir), launch.generation)
    here.mkdir(parents=True, exist_ok=True)
    # Held from the moment the controller can see our pid until the worker
    # exists, so a SIGTERM in between is handed on rather than lost with us.
    stops = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stops)
    if not publish_pid(here, launch.rank):
        return 1
    if launch.cpus:
        os.sched_setaffinity(0, set(launch.cpus))
    child = os.fork()
    if child == 0:
        die_with_parent()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, stops)
        if launch.execs:
            _exec(launch)
        _run(launch)

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, stops)
    _, status = os.waitpid(child, 0)
    code = os.waitstatus_to_exitcode(status)
    record_exit(here, launch.rank, code)
    return 0 if code == 0 else 1


def _take_over_stdio(launch: WarmLaunch) -> None:
    """Point fds 0, 1, 2 where a cold worker's would be: nothing in, its rank's log out."""
    log_to(Path(launch.log), launch.banner)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    # The server's stdin object may hold launch lines it read ahead; a fresh one
    # on the new fd 0 cannot hand them to the worker.
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 - lives as long as we do
    os.chdir(launch.job_dir)
    if launch.workdir:
        try:
            os.chdir(launch.workdir)
        except OSError as err:
            print(f"ringleader: workdir {launch.workdir}: {err.strerror}", flush=True)
            _could_not_start(launch)
            os._exit(127)


def _exec(launch: WarmLaunch) -> NoReturn:
    """In the forked child: become ``launch.execs`` as ``Popen`` would start it cold.

    As ``Popen`` does before ``exec``: signals this interpreter ignores
    (SIGPIPE, SIGXFSZ) are restored to their defaults, which an ``exec``
    would otherwise pass on, and no descriptor but 0, 1 and 2 is inherited.
    A program that cannot start ends with status 127, saying why in its log,
    as the cold wrapper does.
    """
    for name in ("SIGPIPE", "SIGXFZ", "SIGXFSZ"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    try:
        os.execvpe(launch.execs[0], list(launch.execs), dict(launch.env))
    except OSError as err:
        message = f"ringleader: cannot start {launch.execs[0]!r}: {err}\n"
        with contextlib.suppress(OSError):
            os.write(2, message.encode(errors="backslashreplace"))
    os._exit(127)


def _run(launch: WarmLaunch) -> NoReturn:
    """In the forked child: become ``python <entry>`` and never return to the wrapper.

    What the interpreter would do at start-up and exit is done by hand: an
    unbuffered stdout/stderr (workers run with PYTHONUNBUFFERED, and a killed
    worker must not lose its last lines), the thread count from
    OMP_NUM_THREADS (libgomp read it in the server, at import), waiting for
    non-daemon threads before the atexit handlers, and dying of SIGINT on an
    uncaught KeyboardInterrupt. Process groups the job destroys are kept to the
    end (``workers.process_groups``): freed by a DDP model as the script's
    ``main()`` returns, gloo's teardown can deadlock on the GIL.
    """
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.environ.clear()
    os.environ.update(launch.env)
    sys.orig_argv = [sys.executable, *launch.entry]  # what a cold start's would be
    sys.stdout = _unbuffered(1, "strict")
    sys.stderr = _unbuffered(2, "backslashreplace")
    torch = sys.modules.get("torch")
    threads = launch.env.get("OMP_NUM_THREADS", "")
    if torch is not None and threads.isdigit() and int(threads) > 0:
        torch.set_num_threads(int(threads))
    keep_destroyed_groups()
    code = 0
    interrupted = False
    try:
        entry = launch.entry
        if (missing := missing_script(entry)) is not None:
            sys.stderr.write(f"{os.path.basename(sys.executable)}: {missing}\n")
            os._exit(2)  # python's own status for it
        if entry[0] == "-m":
            sys.argv = [entry[1], *entry[2:]]
            sys.path[0] = os.getcwd()
            _LEFT.append(runpy.run_module(entry[1], run_name="__main__", alter_sys=True))
        else:
            sys.argv = list(entry)
            sys.path[0] = os.path.dirname(os.path.abspath(entry[0]))
            _LEFT.append(runpy.run_path(entry[0], run_name="__main__"))
    except SystemExit as stop:
        _LEFT.append(stop)  # its traceback holds the script's globals
        code = _exit_code(stop.code)
    except BaseException as error:  # what the interpreter would print, and its status
        _LEFT.append(error)
        sys.excepthook(type(error), error, error.__traceback__)
        code = 1
        interrupted = isinstance(error, KeyboardInterrupt)
    with contextlib.suppress(BaseException):
        threading._shutdown()  # type: ignore[attr-defined]
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    with contextlib.suppress(BaseException):
        sys.stdout.flush()
        sys.stderr.flush()
    if interrupted:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code)


_LEFT: list[object] = []
"""What the job's code left behind (its globals), kept until ``os._exit``, never freed.

A cold interpreter frees a script's globals only while finalizing, after its
atexit handlers, when a thread that wants the GIL is ended instead of waited
for; a warm worker never frees them, so no destructor of theirs runs earlier
than it would cold (a DDP model's among them: ``workers.process_groups``).
"""


def _unbuffered(fd: int, errors: str) -> io.TextIOWrapper:
    raw = io.FileIO(fd, "w", closefd=False)
    return io.TextIOWrapper(raw, encoding="utf-8", errors=errors, write_through=True)


def _exit_code(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1
