"""Job state in SQLite (WAL): the controller's memory across crashes and restarts.

One row per job. Every change is a committed transaction, so a ``kill -9`` of
the server loses at most the change it was making, and a restarted server picks
up exactly where the last committed state says. WAL lets the API read while the
controller writes.

The tables are ``schema``'s, the file guard ``guard``'s, the SQL of a page
``queries``' and what the API shows of a row ``presentation``'s: this module
is the connection, its transactions, and rows read and written through it.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ringleader.runtime.state import guard
from ringleader.runtime.state.errors import DamagedRow, StoreError, first_line
from ringleader.runtime.state.queries import FINISHED, OWNER, SELECT, PageQuery, page_sql
from ringleader.runtime.state.rows import JobRow, State
from ringleader.runtime.state.schema import (
    API_OWNED,
    COLUMNS,
    FLOAT_COLUMNS,
    INT_COLUMNS,
    JSON_BUT_SPEC,
    JSON_COLUMNS,
    PROGRESS_COLUMNS,
    REQUIRED_FLOATS,
    SCHEMA,
    check_columns,
    migrate,
)
from ringleader.runtime.state.spec import JobSpec

log = logging.getLogger("ringleader.store")

_SPECS_KEPT = 20_000
_EMPTY: dict[str, type[dict[Any, Any]] | type[list[Any]]] = {"{}": dict, "[]": list}
"""Most JSON columns of most rows: new, each time, without the parser."""
_Seen = dict[Any, tuple[tuple[Any, ...], JobRow]]
"""Rows by id, each with the stored values it was parsed from (``Store._last_read``)."""


class Store:
    """Thread-safe access to the jobs database (API threads and the controller)."""

    def __init__(self, path: Path) -> None:
        guard.check_dir(path.parent)
        guard.check_not_lost(path)
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
            self._db.executescript(SCHEMA)
            migrate(self._db)
        except sqlite3.Error as err:
            raise StoreError(
                f"{path}: not a usable ringleader database ({err}); move it aside to start "
                "afresh, or restore it from a backup"
            ) from None
        check_columns(self._db, path)
        self._db.execute("CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state)")
        self._db.execute("CREATE INDEX IF NOT EXISTS jobs_seq ON jobs(seq)")
        self._guard = guard.FileGuard(path)
        """Which files this store opened, to notice the path naming another."""

    def close(self) -> None:
        with self._lock:
            self._db.close()
        if self.lost() is not None:
            self._guard.set_aside_stale_wal()

    def lost(self) -> str | None:
        """How the file at ``path`` stopped being this store's database, if it did."""
        return self._guard.lost()

    def rescue(self) -> Path | None:
        """Save the database as this store sees it next to where it was (``guard``)."""
        return self._guard.rescue(self._db, self._lock)

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
        data = dict(zip(COLUMNS, values, strict=True))
        job_id = str(data["id"])
        column = "spec"
        try:
            for column in JSON_BUT_SPEC:
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
            for column in INT_COLUMNS:
                data[column] = int(data[column])
            for column in FLOAT_COLUMNS:
                if data[column] is not None or column in REQUIRED_FLOATS:
                    data[column] = float(data[column])
        except Exception as err:  # any damage: the message names the column
            raise DamagedRow(job_id, column, first_line(err)) from None
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
        for key in JSON_COLUMNS:
            data[key] = json.dumps(data[key])
        data["cancel_requested"] = int(row.cancel_requested)
        placeholders = ", ".join("?" for _ in COLUMNS)
        kept = () if by_api else API_OWNED
        updates = ", ".join(f"{c} = excluded.{c}" for c in COLUMNS if c != "id" and c not in kept)
        db.execute(
            f"INSERT INTO jobs ({', '.join(COLUMNS)}) VALUES ({placeholders}) "
            f"ON CONFLICT(id) DO UPDATE SET {updates}",
            [data[c] for c in COLUMNS],
        )

    @staticmethod
    def _event(
        db: sqlite3.Connection,
        job_id: str,
        kind: str,
        detail: dict[str, Any],
        at: float | None = None,
    ) -> None:
        db.execute(
            "INSERT INTO events (job_id, t, kind, detail) VALUES (?, ?, ?, ?)",
            (job_id, time.time() if at is None else at, kind, json.dumps(detail)),
        )

    def save(self, row: JobRow, event: str | None = None, **detail: Any) -> None:
        with self._tx() as db:
            self._write(db, row)
            if event is not None:
                self._event(db, row.id, event, detail)

    def save_request(self, row: JobRow, event: str, asked: float, **detail: Any) -> None:
        """``save``, its event timed when the request was made: the job may answer
        before this write gets the lock, and its answer must not look older than
        the question (a resume measured from after the fact)."""
        with self._tx() as db:
            self._write(db, row)
            self._event(db, row.id, event, detail, asked)

    def save_progress(self, row: JobRow) -> None:
        """Save only what a running job's progress changes (``PROGRESS_COLUMNS``).

        The controller does so for every running job at every look; writing
        the whole row (its spec serialised again) made that a tenth of a tick.
        """
        values = [
            json.dumps(getattr(row, c)) if c in JSON_COLUMNS else getattr(row, c)
            for c in PROGRESS_COLUMNS
        ]
        with self._tx() as db:
            db.execute(
                f"UPDATE jobs SET {', '.join(f'{c} = ?' for c in PROGRESS_COLUMNS)} WHERE id = ?",
                [*values, row.id],
            )

    def get(self, job_id: str) -> JobRow | None:
        with self._lock:
            cur = self._db.execute(f"SELECT {', '.join(COLUMNS)} FROM jobs WHERE id = ?", (job_id,))
            values = cur.fetchone()
        return None if values is None else self._row(values)

    def ids_starting(self, prefix: str, most: int = 3, owner: str | None = None) -> list[str]:
        """The id ``prefix`` names exactly, else up to ``most`` ids it begins (git's and
        docker's short ids), of ``owner``'s jobs only if given. A range on the primary
        key: no pattern syntax, no scan."""
        mine, args = ("", ()) if owner is None else (f" AND {OWNER} = ?", (owner,))
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
        return self._read(f"{SELECT} ORDER BY seq")

    def unfinished(self) -> list[JobRow]:
        """Jobs still queued, running or suspended: all the controller needs each tick.

        Finished jobs pile up over months; parsing them every half second
        would make the loop slower with every job ever run.
        """
        seen: _Seen = {}
        rows = self._read(f"{SELECT} WHERE state NOT IN ({FINISHED}) ORDER BY seq", seen)
        self._parsed = seen  # for the next read to copy from: as many as are unfinished
        return rows

    def listing(self) -> list[JobRow | DamagedRow]:
        """Every job in submission order; a damaged row as its ``DamagedRow``, shown not hidden."""
        return self._read_all(f"{SELECT} ORDER BY seq")

    def page(self, query: PageQuery) -> tuple[list[JobRow | DamagedRow], int | None]:
        """One page of jobs in submission order (newest first if ``query.newest_first``).

        Returns the page and the cursor of the next one (``None`` on the last
        page): the ``seq`` of the page's last job, which the next query
        starts after. A cursor stays valid however many jobs arrive between
        pages, unlike an offset.
        """
        sql, params = page_sql(query)
        with self._lock:
            found = self._db.execute(sql, params).fetchall()
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
                f"SELECT state, COALESCE({OWNER}, '?'), COUNT(*) FROM jobs GROUP BY 1, 2"
            ).fetchall()
        return {(str(state), str(user)): int(n) for state, user, n in rows}

    def request_cancel(self, job_id: str) -> JobRow | None:
        with self._tx() as db:
            values = db.execute(f"{SELECT} WHERE id = ?", (job_id,)).fetchone()
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
            values = db.execute(f"{SELECT} WHERE id = ?", (job_id,)).fetchone()
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
