"""Job state in SQLite (WAL): the controller's memory across crashes and restarts.

One row per job. Every change is a committed transaction, so a ``kill -9`` of
the server loses at most the change it was making, and a restarted server picks
up exactly where the last committed state says. WAL lets the API read while the
controller writes.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from ringleader.runtime.state.spec import JobSpec

log = logging.getLogger("ringleader.store")


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


FileId = tuple[int, int]
"""A file's (st_dev, st_ino): which file a path names, whatever is written in it."""


def _file_id(path: Path) -> FileId:
    st = os.stat(path)
    return st.st_dev, st.st_ino


RESCUED = ".rescued-"
"""Infix of the copy a server saves when its database file goes missing under it."""


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

    def public(self) -> dict[str, Any]:
        """The job as listings show it: its id, state ``damaged`` and why (never hidden)."""
        return self.summary() | {"spec": None}

    def summary(self) -> dict[str, Any]:
        return {
            "id": self.job_id,
            "name": None,
            "user": None,
            "state": "damaged",
            "gpus": 0,
            "devices": [],
            "step": 0,
            "epoch": 0.0,
            "epochs": None,
            "loss": None,
            "submitted_at": None,
            "started_at": None,
            "finished_at": None,
            "attempts": 0,
            "resizes": 0,
            "counts": {},
            "bad_progress_lines": 0,
            "error": str(self),
        }


@dataclass(frozen=True, slots=True)
class PageQuery:
    """Which jobs a listing wants: at most ``limit``, after ``cursor``, filtered."""

    limit: int = 100
    cursor: int | None = None
    states: tuple[str, ...] = ()
    user: str | None = None
    newest_first: bool = False


class State(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUSPENDED = "suspended"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in (State.SUCCEEDED, State.FAILED, State.CANCELLED)


@dataclass
class JobRow:
    id: str
    seq: int
    spec: JobSpec
    state: State
    submitted_at: float
    started_at: float | None = None
    finished_at: float | None = None
    step: int = 0
    epoch: float = 0.0
    loss: float | None = None
    workers: int = 0
    devices: list[tuple[str, int]] = field(default_factory=list)
    generation: int = 0
    attempts: int = 0
    error: str | None = None
    stopping: str | None = None
    """Why a stop was requested of the current generation (resize, preempt, cancel)."""
    cancel_requested: bool = False
    progress_offset: int = 0
    observations: dict[str, list[float]] = field(default_factory=dict)
    """Per world size: [mean step time, seconds observed, steps, batch per worker]."""
    shape: dict[str, float] = field(default_factory=dict)
    resizes: int = 0
    last_workers: int = 0
    """World size of the most recent launch (survives the job going back to the queue)."""
    attained_gpu_s: float = 0.0
    """GPU-seconds the job has held so far (least-attained-service policies use it)."""
    packed: dict[str, list[float]] = field(default_factory=dict)
    """Per partner job packed on the same GPU: like ``observations``."""
    state_since: float = 0.0
    """When the job last started running, was suspended, or went back to the queue."""
    last_devices: list[tuple[str, int]] = field(default_factory=list)
    """Devices of the most recent launch: the spine classifies the next one by them."""
    counts: dict[str, int] = field(default_factory=dict)
    """Counted events (``ringleader.spine.actions.Kind``): starts, resizes, migrations…"""
    bad_lines: int = 0
    """Progress lines the job wrote that were skipped as bad (``ringleader.job.records``)."""
    type_observations: dict[str, list[float]] = field(default_factory=dict)
    """Per GPU type and world size (``"v100/2"``): like ``observations``, for gangs
    that ran on one type (``ringleader.runtime.control.progress``)."""
    read_as: tuple[Any, ...] | None = field(default=None, compare=False, repr=False)
    """The stored values ``Store.unfinished`` read this row from: the same object at
    every read while the stored row is unchanged (None: read some other way). The
    controller reuses a queued job's view while it is (``Controller.view``)."""

    def copy(self) -> JobRow:
        """A copy sharing nothing that can change (the spec is immutable).

        By hand: ``dataclasses.replace`` took as long as parsing the row.
        """
        row = object.__new__(JobRow)
        row.__dict__.update(self.__dict__)
        row.devices = list(self.devices)
        row.observations = {k: list(v) for k, v in self.observations.items()}
        row.shape = dict(self.shape)
        row.packed = {k: list(v) for k, v in self.packed.items()}
        row.type_observations = {k: list(v) for k, v in self.type_observations.items()}
        row.last_devices = list(self.last_devices)
        row.counts = dict(self.counts)
        return row

    def public(self) -> dict[str, Any]:
        """The whole job as the API shows it: its summary and its spec.

        ``env`` values are write-only (they hold secrets): the keys are shown,
        each value as ``null``.
        """
        spec = self.spec.model_dump(mode="json")
        spec["env"] = dict.fromkeys(spec.get("env") or {})
        return self.summary() | {"spec": spec}

    def summary(self) -> dict[str, Any]:
        """What a listing shows of a job: no spec (its command and env stay per-job)."""
        return {
            "id": self.id,
            "name": self.spec.name,
            "user": self.spec.user,
            "state": self.state.value,
            "gpus": self.workers,
            "devices": [f"{n}:{i}" for n, i in self.devices],
            "step": self.step,
            "epoch": round(self.epoch, 4),
            "epochs": self.spec.epochs,
            "loss": self.loss,
            "submitted_at": self.submitted_at,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "attempts": self.attempts,
            "resizes": self.resizes,
            "counts": dict(self.counts),
            "bad_progress_lines": self.bad_lines,
            "error": self.error,
        }


_COLUMNS = (
    "id",
    "seq",
    "spec",
    "state",
    "submitted_at",
    "started_at",
    "finished_at",
    "step",
    "epoch",
    "loss",
    "workers",
    "devices",
    "generation",
    "attempts",
    "error",
    "stopping",
    "cancel_requested",
    "progress_offset",
    "observations",
    "shape",
    "resizes",
    "last_workers",
    "attained_gpu_s",
    "packed",
    "state_since",
    "last_devices",
    "counts",
    "bad_lines",
    "type_observations",
)
_JSON = {
    "spec",
    "devices",
    "observations",
    "shape",
    "packed",
    "last_devices",
    "counts",
    "type_observations",
}
_INTS = [
    "seq",
    "step",
    "workers",
    "generation",
    "attempts",
    "progress_offset",
    "resizes",
    "last_workers",
    "bad_lines",
]
_FLOATS = [
    "submitted_at",
    "started_at",
    "finished_at",
    "epoch",
    "loss",
    "attained_gpu_s",
    "state_since",
]
_REQUIRED_FLOATS = {"submitted_at", "epoch", "attained_gpu_s", "state_since"}
_API_OWNED = ("spec", "cancel_requested")
_JSON_BUT_SPEC = sorted(_JSON - {"spec"})
PROGRESS_COLUMNS = (
    "step",
    "epoch",
    "loss",
    "shape",
    "observations",
    "packed",
    "type_observations",
    "progress_offset",
    "bad_lines",
    "attained_gpu_s",
)
"""What reading a job's progress (and the time it held GPUs) changes: ``save_progress``."""
_SPECS_KEPT = 20_000
_EMPTY: dict[str, type[dict[Any, Any]] | type[list[Any]]] = {"{}": dict, "[]": list}
"""Most JSON columns of most rows: new, each time, without the parser."""
_Seen = dict[Any, tuple[tuple[Any, ...], JobRow]]
"""Rows by id, each with the stored values it was parsed from (``Store._last_read``)."""
_SELECT = f"SELECT {', '.join(_COLUMNS)} FROM jobs"
_SELECT_SEQ = f"SELECT seq, {', '.join(_COLUMNS)} FROM jobs"
"""Also the raw ``seq`` (a damaged row's parsed one is not to be trusted): the page cursor."""
_OWNER = "CASE WHEN json_valid(spec) THEN json_extract(spec, '$.user') END"
"""A row's user in SQL: NULL for a spec that is not JSON (a damaged row), never an error."""
_FINISHED = ", ".join(f"'{s.value}'" for s in State if s.finished)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    spec TEXT NOT NULL,
    state TEXT NOT NULL,
    submitted_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL,
    step INTEGER NOT NULL DEFAULT 0,
    epoch REAL NOT NULL DEFAULT 0,
    loss REAL,
    workers INTEGER NOT NULL DEFAULT 0,
    devices TEXT NOT NULL DEFAULT '[]',
    generation INTEGER NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    stopping TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    progress_offset INTEGER NOT NULL DEFAULT 0,
    observations TEXT NOT NULL DEFAULT '{}',
    shape TEXT NOT NULL DEFAULT '{}',
    resizes INTEGER NOT NULL DEFAULT 0,
    last_workers INTEGER NOT NULL DEFAULT 0,
    attained_gpu_s REAL NOT NULL DEFAULT 0,
    packed TEXT NOT NULL DEFAULT '{}',
    state_since REAL NOT NULL DEFAULT 0,
    last_devices TEXT NOT NULL DEFAULT '[]',
    counts TEXT NOT NULL DEFAULT '{}',
    bad_lines INTEGER NOT NULL DEFAULT 0,
    type_observations TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL,
    t REAL NOT NULL,
    kind TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS events_job ON events(job_id);
"""


class Store:
    """Thread-safe access to the jobs database (API threads and the controller)."""

    @staticmethod
    def check_dir(state_dir: Path) -> None:
        """Create the state dir if need be; ``StoreError`` if it cannot be one."""
        try:
            state_dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise StoreError(
                f"state dir {state_dir}: cannot be a directory ({err.strerror}); "
                "give --state-dir a directory path"
            ) from None

    @staticmethod
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

    def __init__(self, path: Path) -> None:
        self.check_dir(path.parent)
        self.check_not_lost(path)
        self.path = path
        self._lock = threading.Lock()
        self.damaged: dict[str, DamagedRow] = {}
        """Jobs whose rows could not be read when last read, by id."""
        self._specs: dict[str, JobSpec] = {}
        """Validated specs by their stored text (``_spec``)."""
        self._parsed: _Seen = {}
        """The last ``unfinished()`` read's rows, with the values each was parsed from."""
        try:
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
            self._migrate()
        except sqlite3.Error as err:
            raise StoreError(
                f"{path}: not a usable ringleader database ({err}); move it aside to start "
                "afresh, or restore it from a backup"
            ) from None
        have = {row[1] for row in self._db.execute("PRAGMA table_info(jobs)")}
        if missing := [c for c in _COLUMNS if c not in have]:
            self._db.close()
            raise StoreError(
                f"{path}: table jobs lacks column(s) {', '.join(missing)}: this is not a "
                "ringleader database, or it was damaged; move it aside or restore a backup"
            )
        self._db.execute("CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state)")
        self._db.execute("CREATE INDEX IF NOT EXISTS jobs_seq ON jobs(seq)")
        self._opened = self._ids()
        """The files this store opened: the database, its WAL and its shared memory."""

    def _migrate(self) -> None:
        """Add columns that newer versions keep, to a database an older one created."""
        have = {row[1] for row in self._db.execute("PRAGMA table_info(jobs)")}
        for column, ddl in (
            ("last_workers", "INTEGER NOT NULL DEFAULT 0"),
            ("attained_gpu_s", "REAL NOT NULL DEFAULT 0"),
            ("packed", "TEXT NOT NULL DEFAULT '{}'"),
            ("state_since", "REAL NOT NULL DEFAULT 0"),
            ("last_devices", "TEXT NOT NULL DEFAULT '[]'"),
            ("counts", "TEXT NOT NULL DEFAULT '{}'"),
            ("bad_lines", "INTEGER NOT NULL DEFAULT 0"),
            ("type_observations", "TEXT NOT NULL DEFAULT '{}'"),
        ):
            if column not in have:
                self._db.execute(f"ALTER TABLE jobs ADD COLUMN {column} {ddl}")

    def close(self) -> None:
        with self._lock:
            self._db.close()
        if self.lost() is not None:
            self._set_aside_stale_wal()

    # -- the database file going missing under a running server ---------------
    def _ids(self) -> dict[str, FileId]:
        found: dict[str, FileId] = {}
        for suffix in ("", "-wal", "-shm"):
            with suppress(OSError):
                found[suffix] = _file_id(Path(f"{self.path}{suffix}"))
        return found

    def lost(self) -> str | None:
        """How the file at ``path`` stopped being the database this store opened, if it did.

        SQLite goes on reading and writing the file it opened after it has
        been deleted or replaced (``rm``, a restore copied over it with
        ``mv``): a server would keep accepting jobs into a file nobody can
        see, and the next one would start on another. Cheap: one ``stat``.
        """
        try:
            now = _file_id(self.path)
        except (FileNotFoundError, NotADirectoryError):
            return "deleted"
        except OSError:
            return None  # cannot tell (EACCES, EIO): no reason to stop a working server
        return None if now == self._opened.get("") else "replaced by another file"

    def rescue(self) -> Path | None:
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
            with self._lock:
                copy = sqlite3.connect(target)
                try:
                    self._db.backup(copy)
                    # One self-contained file, to move into place as it is.
                    copy.execute("PRAGMA journal_mode=DELETE")
                finally:
                    copy.close()
        except (OSError, sqlite3.Error) as err:
            log.error("cannot save a copy of the database to %s (%s)", target, err)
            target.unlink(missing_ok=True)
            return None
        return target

    def _set_aside_stale_wal(self) -> None:
        """Rename this store's own WAL and shared-memory files once its database is gone.

        They belong to the file that was deleted or replaced. Left in place,
        SQLite would replay the WAL into whatever file is put at ``path``
        next (a backup being restored, another database), damaging it.
        """
        stamp = time.strftime("%Y%m%dT%H%M%S")
        for suffix in ("-wal", "-shm"):
            path = Path(f"{self.path}{suffix}")
            try:
                if _file_id(path) == self._opened.get(suffix):
                    path.rename(path.with_name(f"{path.name}.stale-{stamp}"))
            except OSError:
                continue

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
                self._db.execute("COMMIT")
            except BaseException:
                # Also after a failed COMMIT (a full disk): SQLite may keep the
                # transaction open, and every later BEGIN would fail for good.
                if self._db.in_transaction:
                    with suppress(sqlite3.Error):  # the error to report is the first one
                        self._db.execute("ROLLBACK")
                raise

    def _row(self, values: tuple[Any, ...]) -> JobRow:
        """The row as a ``JobRow``; raises ``DamagedRow`` naming the column it cannot read.

        A row the last ``unfinished()`` read with the very same values is
        copied, not parsed again: the controller reads every unfinished row
        each tick, and most (the queued ones) have not changed since the last.
        """
        known = self._last_read(values)
        return self._parse(values) if known is None else known[1].copy()

    def _last_read(self, values: tuple[Any, ...]) -> tuple[tuple[Any, ...], JobRow] | None:
        """The last ``unfinished()`` read's entry for this row, if its values are these."""
        known = self._parsed.get(values[0])
        return known if known is not None and known[0] == values else None

    def _parse(self, values: tuple[Any, ...]) -> JobRow:
        data = dict(zip(_COLUMNS, values, strict=True))
        job_id = str(data["id"])
        column = "spec"
        try:
            for column in _JSON_BUT_SPEC:
                data[column] = (
                    _EMPTY[data[column]]() if data[column] in _EMPTY else json.loads(data[column])
                )
            column = "spec"
            data["spec"] = self._spec(data["spec"])
            column = "state"
            data["state"] = State(data["state"])
            for column in ("devices", "last_devices"):
                data[column] = [(str(n), int(i)) for n, i in data[column]]
            column = "counts"
            data["counts"] = {str(k): int(v) for k, v in data["counts"].items()}
            for column in ("observations", "packed", "type_observations"):
                data[column] = {str(k): [float(x) for x in v[:4]] for k, v in data[column].items()}
                if any(len(v) != 4 for v in data[column].values()):
                    raise ValueError("each entry needs 4 numbers")
            column = "shape"
            data["shape"] = {str(k): float(v) for k, v in data["shape"].items()}
            for column in _INTS:
                data[column] = int(data[column])
            for column in _FLOATS:
                if data[column] is not None or column in _REQUIRED_FLOATS:
                    data[column] = float(data[column])
        except Exception as err:  # any damage: the message names the column
            raise DamagedRow(job_id, column, _first_line(err)) from None
        data["cancel_requested"] = bool(data["cancel_requested"])
        return JobRow(**data)

    def _spec(self, text: str) -> JobSpec:
        """The spec stored as ``text``, validated once per distinct text.

        The controller reads every unfinished row each tick; with a thousand
        jobs queued, validating their specs again each time was half of its
        work. A spec is immutable, so the validated one is shared.
        """
        spec = self._specs.get(text)
        if spec is None:
            spec = JobSpec.model_validate(json.loads(text))
            if len(self._specs) >= _SPECS_KEPT:
                self._specs.clear()
            self._specs[text] = spec
        return spec

    def add(self, spec: JobSpec, now: float | None = None) -> JobRow:
        with self._tx() as db:
            # A fresh id, never one in use: the write below is an upsert, and a
            # repeated id would overwrite (and orphan) a live job.
            while True:
                job_id = f"{spec.name[:40]}-{uuid.uuid4().hex[:8]}"
                if db.execute("SELECT 1 FROM jobs WHERE id = ?", (job_id,)).fetchone() is None:
                    break
            seq = db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM jobs").fetchone()[0]
            at = now if now is not None else time.time()
            # Waiting since it was submitted: a policy ranks waiters by this
            # (time-slicing runs the longest-waiting first), as the simulator does.
            row = JobRow(job_id, seq, spec, State.QUEUED, at, state_since=at)
            self._write(db, row)
            self._event(db, job_id, "submitted", {})
        return row

    def _write(self, db: sqlite3.Connection, row: JobRow, *, by_api: bool = False) -> None:
        """Insert or update ``row``.

        The API owns the spec (priority changes) and the cancel flag; the
        controller saves rows it read a moment earlier, so its writes leave
        those two columns as they are in the database and never undo a
        request that arrived in between.
        """
        data = asdict(row)
        data["spec"] = row.spec.model_dump(mode="json")
        data["state"] = row.state.value
        for key in _JSON:
            data[key] = json.dumps(data[key])
        data["cancel_requested"] = int(row.cancel_requested)
        placeholders = ", ".join("?" for _ in _COLUMNS)
        kept = () if by_api else _API_OWNED
        updates = ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS if c != "id" and c not in kept)
        db.execute(
            f"INSERT INTO jobs ({', '.join(_COLUMNS)}) VALUES ({placeholders}) "
            f"ON CONFLICT(id) DO UPDATE SET {updates}",
            [data[c] for c in _COLUMNS],
        )

    @staticmethod
    def _event(db: sqlite3.Connection, job_id: str, kind: str, detail: dict[str, Any]) -> None:
        db.execute(
            "INSERT INTO events (job_id, t, kind, detail) VALUES (?, ?, ?, ?)",
            (job_id, time.time(), kind, json.dumps(detail)),
        )

    def save(self, row: JobRow, event: str | None = None, **detail: Any) -> None:
        with self._tx() as db:
            self._write(db, row)
            if event is not None:
                self._event(db, row.id, event, detail)

    def save_progress(self, row: JobRow) -> None:
        """Save only what a running job's progress changes (``PROGRESS_COLUMNS``).

        The controller does so for every running job at every look; writing
        the whole row (its spec serialised again) made that a tenth of a tick.
        """
        values = [
            json.dumps(getattr(row, c)) if c in _JSON else getattr(row, c) for c in PROGRESS_COLUMNS
        ]
        with self._tx() as db:
            db.execute(
                f"UPDATE jobs SET {', '.join(f'{c} = ?' for c in PROGRESS_COLUMNS)} WHERE id = ?",
                [*values, row.id],
            )

    def get(self, job_id: str) -> JobRow | None:
        with self._lock:
            cur = self._db.execute(
                f"SELECT {', '.join(_COLUMNS)} FROM jobs WHERE id = ?", (job_id,)
            )
            values = cur.fetchone()
        return None if values is None else self._row(values)

    def ids_starting(self, prefix: str, most: int = 3, owner: str | None = None) -> list[str]:
        """The id ``prefix`` names exactly, else up to ``most`` ids it begins (git's and
        docker's short ids), of ``owner``'s jobs only if given. A range on the primary
        key: no pattern syntax, no scan."""
        mine, args = ("", ()) if owner is None else (f" AND {_OWNER} = ?", (owner,))
        with self._lock:
            exact = f"SELECT 1 FROM jobs WHERE id = ?{mine}"
            if self._db.execute(exact, (prefix, *args)).fetchone():
                return [prefix]
            cur = self._db.execute(
                f"SELECT id FROM jobs WHERE id >= ? AND id < ?{mine} ORDER BY id LIMIT ?",
                (prefix, prefix + "\U0010ffff", *args, most),
            )
            return [str(r[0]) for r in cur.fetchall()]

    def all(self) -> list[JobRow]:
        return self._read(f"{_SELECT} ORDER BY seq")

    def unfinished(self) -> list[JobRow]:
        """Jobs still queued, running or suspended: all the controller needs each tick.

        Finished jobs pile up over months; parsing them every half second
        would make the loop slower with every job ever run.
        """
        seen: _Seen = {}
        rows = self._read(f"{_SELECT} WHERE state NOT IN ({_FINISHED}) ORDER BY seq", seen)
        self._parsed = seen  # for the next read to copy from: as many as are unfinished
        return rows

    def listing(self) -> list[JobRow | DamagedRow]:
        """Every job in submission order; a damaged row as its ``DamagedRow``, shown not hidden."""
        return self._read_all(f"{_SELECT} ORDER BY seq")

    def page(self, query: PageQuery) -> tuple[list[JobRow | DamagedRow], int | None]:
        """One page of jobs in submission order (newest first if ``query.newest_first``).

        Returns the page and the cursor of the next one (``None`` on the last
        page): the ``seq`` of the page's last job, which the next query
        starts after. A cursor stays valid however many jobs arrive between
        pages, unlike an offset.
        """
        where: list[str] = []
        params: list[object] = []
        if query.cursor is not None:
            where.append("seq < ?" if query.newest_first else "seq > ?")
            params.append(query.cursor)
        if query.states:
            where.append(f"state IN ({', '.join('?' for _ in query.states)})")
            params.extend(query.states)
        if query.user is not None:
            where.append(f"{_OWNER} = ?")
            params.append(query.user)
        sql = _SELECT_SEQ + (f" WHERE {' AND '.join(where)}" if where else "")
        sql += f" ORDER BY seq {'DESC' if query.newest_first else 'ASC'} LIMIT ?"
        with self._lock:
            found = self._db.execute(sql, [*params, query.limit + 1]).fetchall()
        more = len(found) > query.limit
        found = found[: query.limit]
        rows = self._parse_all([values[1:] for values in found])
        return rows, (int(found[-1][0]) if more and found else None)

    def _read(self, sql: str, seen: _Seen | None = None) -> list[JobRow]:
        return [row for row in self._read_all(sql, seen) if isinstance(row, JobRow)]

    def _read_all(self, sql: str, seen: _Seen | None = None) -> list[JobRow | DamagedRow]:
        with self._lock:
            rows = self._db.execute(sql).fetchall()
        return self._parse_all(rows, seen)

    def _parse_all(
        self,
        rows: list[tuple[Any, ...]],
        seen: _Seen | None = None,
    ) -> list[JobRow | DamagedRow]:
        """The rows parsed (or copied, see ``_row``); ``seen`` gets each readable one
        with its values and a copy of its own."""
        out: list[JobRow | DamagedRow] = []
        for values in rows:
            try:
                known = self._last_read(values)
                if known is not None:
                    row = known[1].copy()
                else:
                    row = self._parse(values)
                    if seen is not None:
                        known = (values, row.copy())
                if seen is not None and known is not None:
                    seen[row.id] = known
                    row.read_as = known[0]
            except DamagedRow as err:
                if err.job_id not in self.damaged:
                    log.error("%s", err)
                self.damaged[err.job_id] = err
                out.append(err)
                continue
            out.append(row)
            self.damaged.pop(row.id, None)  # mended by hand: out of the report
        return out

    def counts(self) -> dict[tuple[str, str], int]:
        """Jobs by (state, user): one grouped scan, however many jobs there are."""
        with self._lock:
            rows = self._db.execute(
                f"SELECT state, COALESCE({_OWNER}, '?'), COUNT(*) FROM jobs GROUP BY 1, 2"
            ).fetchall()
        return {(str(state), str(user)): int(n) for state, user, n in rows}

    def request_cancel(self, job_id: str) -> JobRow | None:
        with self._tx() as db:
            values = db.execute(f"{_SELECT} WHERE id = ?", (job_id,)).fetchone()
            if values is None:
                return None
            row = self._row(values)
            if not row.state.finished and not row.cancel_requested:
                row.cancel_requested = True
                self._write(db, row, by_api=True)
                self._event(db, job_id, "cancel_requested", {})
        return row

    def set_priority(self, job_id: str, priority: int) -> JobRow | None:
        """Change a job's priority (the policy sees it at its next decision)."""
        with self._tx() as db:
            values = db.execute(f"{_SELECT} WHERE id = ?", (job_id,)).fetchone()
            if values is None:
                return None
            row = self._row(values)
            if row.spec.priority != priority:
                old = row.spec.priority
                row.spec = row.spec.model_copy(update={"priority": priority})
                self._write(db, row, by_api=True)
                self._event(db, job_id, "priority", {"from": old, "to": priority})
        return row

    def events(self, job_id: str) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._db.execute(
                "SELECT t, kind, detail FROM events WHERE job_id = ? ORDER BY id", (job_id,)
            ).fetchall()
        out = []
        for t, kind, detail in rows:
            try:
                extra = json.loads(detail)
                out.append({"t": t, "kind": kind, **extra})
            except (ValueError, TypeError):
                out.append({"t": t, "kind": kind, "damaged_detail": str(detail)[:200]})
        return out


def _first_line(err: Exception) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"
