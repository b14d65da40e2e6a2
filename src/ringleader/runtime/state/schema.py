"""The jobs database's tables: their columns, how a new one is made, how an old one grows.

``COLUMNS`` is the order a row's values are read and written in; the typed
lists say how each column is parsed back. A database an older version made
is upgraded in place by ``migrate``, one added column at a time.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ringleader.runtime.state.errors import StoreError

COLUMNS = (
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
JSON_COLUMNS = {
    "spec",
    "devices",
    "observations",
    "shape",
    "packed",
    "last_devices",
    "counts",
    "type_observations",
}
INT_COLUMNS = [
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
FLOAT_COLUMNS = [
    "submitted_at",
    "started_at",
    "finished_at",
    "epoch",
    "loss",
    "attained_gpu_s",
    "state_since",
]
REQUIRED_FLOATS = {"submitted_at", "epoch", "attained_gpu_s", "state_since"}
API_OWNED = ("spec", "cancel_requested")
JSON_BUT_SPEC = sorted(JSON_COLUMNS - {"spec"})
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

SCHEMA = """
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


def migrate(db: sqlite3.Connection) -> None:
    """Add columns that newer versions keep, to a database an older one created."""
    have = {row[1] for row in db.execute("PRAGMA table_info(jobs)")}
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
            db.execute(f"ALTER TABLE jobs ADD COLUMN {column} {ddl}")


def check_columns(db: sqlite3.Connection, path: Path) -> None:
    """``StoreError`` (the connection closed) if the jobs table lacks a column we keep."""
    have = {row[1] for row in db.execute("PRAGMA table_info(jobs)")}
    if missing := [c for c in COLUMNS if c not in have]:
        db.close()
        raise StoreError(
            f"{path}: table jobs lacks column(s) {', '.join(missing)}: this is not a "
            "ringleader database, or it was damaged; move it aside or restore a backup"
        )
