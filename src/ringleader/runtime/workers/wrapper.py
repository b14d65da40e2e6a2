"""What the parent of every worker does around it, cold (``launch``) or forked (``warm``).

Both wrappers keep a rank's pid and exit status in the generation's run
directory, written whole, point the worker's output at its rank's log, and
make sure the worker never outlives them. One module, so that neither
wrapper has to import the other for it.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path


def run_dir(job_dir: Path, generation: int) -> Path:
    """Where one generation's ranks keep their pid and exit files."""
    return job_dir / "run" / f"gen{generation:06d}"


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
