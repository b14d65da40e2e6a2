"""The files through which the scheduler and a job's workers talk.

All live in the job's directory, which every worker can read (a shared
filesystem on a multi-node cluster):

* ``control.json`` — written by the controller (atomically): which launch
  generation is current and what it should do (``run``, ``suspend``, ``stop``).
  Only rank 0 reads it, at minibatch boundaries, and broadcasts the action so
  every rank acts on the same step.
* ``progress.jsonl`` — appended by rank 0: one line per minibatch (step, epoch,
  loss, step time, world size, learning rate) and one per lifecycle event
  (``started``, ``stopped``, ``done``).
* ``checkpoints/`` — see ``ringleader.job.checkpoint``.

Files rather than sockets: they outlive a crashed controller, need no ports,
and a restarted controller finds the whole story where it left it.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
import time
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

CONTROL = "control.json"
PROGRESS = "progress.jsonl"
CHECKPOINTS = "checkpoints"


class Action(StrEnum):
    RUN = "run"
    SUSPEND = "suspend"
    STOP = "stop"
    """Checkpoint at the next minibatch boundary and exit 0."""


ACTION_CODES = {Action.RUN: 0, Action.SUSPEND: 1, Action.STOP: 2}


@dataclass(frozen=True, slots=True)
class Control:
    generation: int
    action: Action
    checkpoint: int = 0
    """Raise it to ask for a checkpoint at the next boundary, without stopping."""
    written_at: float | None = None
    """When the scheduler wrote it (set on write): suspend/resume latency starts here."""


def write_control(job_dir: Path, control: Control) -> None:
    """Atomically replace the job's control file."""
    job_dir.mkdir(parents=True, exist_ok=True)
    payload = json.dumps(
        {
            "generation": control.generation,
            "action": control.action.value,
            "checkpoint": control.checkpoint,
            "t": time.time(),
        }
    )
    fd, tmp = tempfile.mkstemp(prefix=".control-", dir=job_dir)
    with os.fdopen(fd, "w") as f:
        f.write(payload)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, job_dir / CONTROL)


def read_control(job_dir: Path) -> Control | None:
    try:
        data = json.loads((job_dir / CONTROL).read_text())
        written = data.get("t")
        return Control(
            int(data["generation"]),
            Action(data["action"]),
            int(data.get("checkpoint", 0)),
            float(written) if written is not None else None,
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def append_progress(job_dir: Path, record: dict[str, Any]) -> None:
    line = json.dumps(record, separators=(",", ":")) + "\n"
    with open(job_dir / PROGRESS, "a", encoding="utf-8") as f:
        f.write(line)
        f.flush()


class ProgressReader:
    """Reads the progress lines appended since the last call (complete lines only)."""

    def __init__(self, path: Path, offset: int = 0) -> None:
        self.path = path
        self.offset = offset

    def read_new(self) -> list[dict[str, Any]]:
        """Up to ``MAX_READ`` bytes of complete new lines; the rest at the next call."""
        chunk = _read_regular(self.path, self.offset, MAX_READ)
        if chunk is None:
            return []
        if not chunk and _size(self.path) < self.offset:
            self.offset = 0  # truncated or replaced by an operator: start over
            return []
        end = chunk.rfind(b"\n")
        if end < 0:
            return []
        self.offset += end + 1
        records = []
        for raw in chunk[: end + 1].splitlines():
            try:
                value = json.loads(raw)
            except ValueError:
                continue
            if isinstance(value, dict):
                records.append(value)
        return records


MAX_READ = 8 << 20
"""Progress bytes read per call: a long backlog is taken in slices, not at once."""
TAIL_BYTES = 256 << 10


def last_event(path: Path, generation: int, kinds: tuple[str, ...]) -> str | None:
    """The last of ``kinds`` that ``generation`` logged, from the tail of the progress file.

    A worker's closing event (``done``, ``stopped``) and a suspend's
    confirmation are among the last lines its generation writes, so the tail
    is enough, and reading it is cheap however long the file has grown.
    """
    size = _size(path)
    start = max(0, size - TAIL_BYTES)
    chunk = _read_regular(path, start, TAIL_BYTES)
    if not chunk:
        return None
    for raw in reversed(chunk.splitlines()):
        try:
            rec = json.loads(raw)
        except ValueError:
            continue
        if isinstance(rec, dict) and rec.get("g") == generation and rec.get("event") in kinds:
            return str(rec["event"])
    return None


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _read_regular(path: Path, offset: int, limit: int) -> bytes | None:
    """Bytes of a regular file from ``offset``; ``None`` if it is missing or not a file.

    Opened non-blocking and checked, so a FIFO or a device put in its place
    cannot stall the reader (the controller's event loop).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, f"{path} is not a regular file")
        os.lseek(fd, offset, os.SEEK_SET)
        return os.read(fd, limit)
    finally:
        os.close(fd)
