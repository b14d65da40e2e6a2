"""Job files kept within a size: rank logs and the progress file.

A job writes both as long as it runs, and a chatty one fills a disk (one
short job wrote 15.5 MB of progress). Past its cap a file is rotated once:
what it held moves to ``<name>.1`` (replacing the older ``.1``) and the
file starts again empty, so a job keeps at most twice the cap of each and
the newest lines are always in the file itself.

* A **log** is held open by its worker (appending), so it is copied and then
  truncated in place, as logrotate's ``copytruncate`` does: lines written in
  between are lost.
* The **progress file** is opened per record by the job library, so it is
  renamed: the next record starts the new file, and the reader finishes
  the old one first (``ProgressReader.rotate``), so no record is lost.

The job owns its directory: every path is opened without following links
and only as a regular file, and ``.1`` is written by rename, never through
whatever the job may have put there.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

LOG_CAP_BYTES = 64 << 20
PROGRESS_CAP_BYTES = 16 << 20
_COPY = 1 << 20


def rotated(path: Path) -> Path:
    return path.with_name(path.name + ".1")


def cap_log(path: Path, cap: int) -> bool:
    """Rotate the log at ``path`` if it is past ``cap`` bytes; whether it was."""
    if cap <= 0:
        return False
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size <= cap:
            return False
        tmp_fd, tmp = tempfile.mkstemp(prefix=".rotate-", dir=path.parent)
        try:
            with os.fdopen(tmp_fd, "wb") as out:
                offset = 0
                while chunk := os.pread(fd, _COPY, offset):
                    out.write(chunk)
                    offset += len(chunk)
            os.ftruncate(fd, 0)  # the worker appends: its next line starts the file again
            os.replace(tmp, rotated(path))
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            return False
        return True
    finally:
        os.close(fd)
