"""What can go wrong with the jobs database, said so that someone can act on it.

A store that cannot open its file says which file and what to do; a disk
that is full is the operator's to fix, not the request's; one row that
cannot be read back is reported and skipped, never allowed to stop the rest.
"""

from __future__ import annotations

import errno
import sqlite3


class StoreError(RuntimeError):
    """The database cannot be opened or is not one of ours; says which file and what to do."""


def disk_full(err: BaseException) -> bool:
    """Whether ``err`` says the disk (or its quota) is full: the one fault the fix for
    which is the operator's, not the request's, so callers say so instead of failing."""
    if isinstance(err, OSError):
        return err.errno in (errno.ENOSPC, errno.EDQUOT)
    if isinstance(err, sqlite3.Error):
        return getattr(err, "sqlite_errorname", "") == "SQLITE_FULL" or "is full" in str(err)
    return False


class DamagedRow(ValueError):
    """One job's row cannot be read back (edited by hand, disk damage, a bad upgrade).

    The job is left out of what the controller sees, so one bad row never
    stops the scheduling of every other job.
    """

    def __init__(self, job_id: str, column: str, reason: str) -> None:
        self.job_id, self.column, self.reason = job_id, column, reason
        super().__init__(
            f"job {job_id}: its stored {column} cannot be read ({reason}); the scheduler "
            "skips this job; fix or delete its row in ringleader.db"
        )


def first_line(err: Exception) -> str:
    """An error as one line, its type first: what a damaged row says it is."""
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"
