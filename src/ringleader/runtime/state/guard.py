"""The file-identity guard: noticing that the database file went missing under a server.

SQLite keeps using the file it opened after the path stops naming it
(deleted, or replaced by a restore). The guard remembers which files a store
opened, by device and inode, tells when the path names another, saves what
the store still sees, and refuses a server that would start on an empty file
beside the jobs of a lost one.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from contextlib import suppress
from pathlib import Path

from ringleader.runtime.state.errors import StoreError

log = logging.getLogger("ringleader.store")

FileId = tuple[int, int]
"""A file's (st_dev, st_ino): which file a path names, whatever is written in it."""


def file_id(path: Path) -> FileId:
    st = os.stat(path)
    return st.st_dev, st.st_ino


RESCUED = ".rescued-"
"""Infix of the copy a server saves when its database file goes missing under it."""


def check_dir(state_dir: Path) -> None:
    """Create the state dir if need be; ``StoreError`` if it cannot be one."""
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise StoreError(
            f"state dir {state_dir}: cannot be a directory ({err.strerror}); "
            "give --state-dir a directory path"
        ) from None


def check_not_lost(path: Path) -> None:
    """``StoreError`` if ``path`` is missing from a state dir that has held jobs.

    An empty database made there would forget every job while their
    directories (and maybe their running workers) stay behind, so the
    server is refused before anything creates the file.
    """
    if path.exists():
        return
    jobs = path.parent / "jobs"
    try:
        dirs = sum(1 for entry in os.scandir(jobs) if entry.is_dir(follow_symlinks=False))
    except OSError:
        dirs = 0
    rescued = sorted(
        p
        for p in path.parent.glob(f"{path.name}{RESCUED}*")
        if not p.name.endswith(("-wal", "-shm", "-journal"))
    )
    copy = (
        f" (the last server saved its last state in {rescued[-1]}: move that to {path})"
        if rescued
        else ""
    )
    if dirs:
        raise StoreError(
            f"{jobs}: {dirs} job director{'y' if dirs == 1 else 'ies'} but no database: "
            f"restore {path} from a "
            f"backup{copy}, or move {jobs} aside to start afresh"
        )
    if rescued:
        raise StoreError(
            f"{path}: no database, but the last server saved its last state in "
            f"{rescued[-1]}: move that to {path} to carry on, or move it aside to start afresh"
        )
    wal = Path(f"{path}-wal")
    if wal.is_file() and wal.stat().st_size > 0:
        # SQLite would replay it into the new, empty file: half of an old database.
        raise StoreError(
            f"{path}: no database, but its write-ahead log {wal} is there: restore {path} "
            f"from a backup, or move {wal} aside to start afresh"
        )


class FileGuard:
    """The files a store opened at ``path`` (database, WAL, shared memory), by identity."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.opened = self._ids()
        """The files this store opened: the database, its WAL and its shared memory."""

    def _ids(self) -> dict[str, FileId]:
        found: dict[str, FileId] = {}
        for suffix in ("", "-wal", "-shm"):
            with suppress(OSError):
                found[suffix] = file_id(Path(f"{self.path}{suffix}"))
        return found

    def lost(self) -> str | None:
        """How the file at ``path`` stopped being the database this store opened, if it did.

        SQLite goes on reading and writing the file it opened after it has
        been deleted or replaced (``rm``, a restore copied over it with
        ``mv``): a server would keep accepting jobs into a file nobody can
        see, and the next one would start on another. Cheap: one ``stat``.
        """
        try:
            now = file_id(self.path)
        except (FileNotFoundError, NotADirectoryError):
            return "deleted"
        except OSError:
            return None  # cannot tell (EACCES, EIO): no reason to stop a working server
        return None if now == self.opened.get("") else "replaced by another file"

    def rescue(self, db: sqlite3.Connection, lock: threading.Lock) -> Path | None:
        """Copy the database as this store sees it (SQLite's backup API, WAL included)
        next to where it was, so a deleted or replaced file loses nothing; the copy's
        path, or None if it could not be written (logged)."""
        stamp = time.strftime("%Y%m%dT%H%M%S")
        target = self.path.with_name(f"{self.path.name}{RESCUED}{stamp}")
        if target.exists():
            target = target.with_name(f"{target.name}-{os.getpid()}-{time.monotonic_ns()}")
        try:
            # Made 0600 before a byte is written: it holds the users' token hashes.
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            with lock:
                copy = sqlite3.connect(target)
                try:
                    db.backup(copy)
                    # One self-contained file, to move into place as it is.
                    copy.execute("PRAGMA journal_mode=DELETE")
                finally:
                    copy.close()
        except (OSError, sqlite3.Error) as err:
            log.error("cannot save a copy of the database to %s (%s)", target, err)
            target.unlink(missing_ok=True)
            return None
        return target

    def set_aside_stale_wal(self) -> None:
        """Rename this store's own WAL and shared-memory files once its database is gone.

        They belong to the file that was deleted or replaced. Left in place,
        SQLite would replay the WAL into whatever file is put at ``path``
        next (a backup being restored, another database), damaging it.
        """
        stamp = time.strftime("%Y%m%dT%H%M%S")
        for suffix in ("-wal", "-shm"):
            path = Path(f"{self.path}{suffix}")
            try:
                if file_id(path) == self.opened.get(suffix):
                    path.rename(path.with_name(f"{path.name}.stale-{stamp}"))
            except OSError:
                continue
