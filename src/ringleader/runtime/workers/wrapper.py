"""What the parent of every worker does around it, cold (``launch``) or forked (``warm``).

Both wrappers keep a rank's pid and exit status in the generation's run
directory, written whole, point the worker's output at its rank's log, and
make sure the worker never outlives them. One module, so that neither
wrapper has to import the other for it.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import sys
from pathlib import Path

from ringleader.runtime.workers.procs import start_ticks

ABANDONED = "abandoned"
"""In a generation's run directory: the controller gave the generation up (killed it)."""
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


def run_dir(job_dir: Path, generation: int) -> Path:
    """Where one generation's ranks keep their pid and exit files."""
    return job_dir / "run" / f"gen{generation:06d}"


def abandon(job_dir: Path, generation: int) -> None:
    """Mark ``generation`` given up before its ranks are killed, so that a wrapper that
    starts only later (a cold start slower than the controller's patience) stays out.

    A wrapper writes its pid, then looks for the mark (``publish_pid``); the
    controller writes the mark, then reads the pids to kill. Whichever comes
    second sees the other, so no rank of the generation runs on unwatched.
    The job's directory is its owner's: nothing on the way is followed as a
    link, and a directory made here is handed to that owner.
    """
    fds: list[int] = []
    try:
        fds.append(os.open(job_dir, _DIR))
        owner = os.fstat(fds[0])
        for name in ("run", run_dir(job_dir, generation).name):
            made = False
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o755, dir_fd=fds[-1])
                made = True
            fds.append(os.open(name, _DIR, dir_fd=fds[-1]))
            if made and os.fstat(fds[-1]).st_uid != owner.st_uid:
                os.fchown(fds[-1], owner.st_uid, owner.st_gid)
        flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
        os.close(os.open(ABANDONED, flags, 0o644, dir_fd=fds[-1]))
    except OSError:
        pass  # no job directory, or one its owner broke: nothing of it can start
    finally:
        for fd in fds:
            os.close(fd)


def publish_pid(here: Path, rank: int) -> bool:
    """Write this wrapper's pid and start time, then look for ``abandon``'s mark: False
    where the generation was given up, the rank recorded as killed (137) and nothing
    to start. In this order, so that a kill either finds the pid or leaves the mark."""
    pid = os.getpid()
    write_atomic(here / f"rank{rank}.pid", f"{pid} {start_ticks(pid)}\n")
    if not (here / ABANDONED).exists():
        return True
    write_atomic(here / f"rank{rank}.exit", "137\n")
    print("ringleader: this launch was given up before it started", file=sys.stderr, flush=True)
    return False


def record_exit(here: Path, rank: int, code: int) -> None:
    """Once the worker was waited for: the CPU seconds it used (with whatever it waited
    for) in ``rank<r>.cpu``, then its exit status. A fidelity run tells the workers'
    load from the rest of the machine's by the first (``fidelity.machine``). The
    wrapper has no other child, and a fork starts its children's count at 0."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    with contextlib.suppress(OSError):
        write_atomic(here / f"rank{rank}.cpu", f"{used.ru_utime + used.ru_stime:.3f}\n")
    write_atomic(here / f"rank{rank}.exit", f"{code}\n")


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` whole, so a reader never sees half a pid or exit status."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def log_to(path: Path, banner: str) -> None:
    """Point fds 1 and 2 at the end of ``path`` (made if need be), after ``banner``.

    Opened without following a link as the last part: the job owns the
    directory, and a wrapper still running as root must not append elsewhere.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o644)
    os.write(fd, banner.encode())
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def die_with_parent() -> None:
    """Linux: get SIGKILL when the parent process dies (a worker never outlives its wrapper)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
