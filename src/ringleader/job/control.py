"""The files through which the scheduler and a job's workers talk.

All live in the job's directory, which every worker can read (a shared
filesystem on a multi-node cluster):

* ``control.json`` — written by the controller (atomically): which launch
  generation is current and what it should do (``run``, ``suspend``, ``stop``).
  Only rank 0 reads it, at minibatch boundaries, and broadcasts the action so
  every rank acts on the same step.
* ``progress.jsonl`` — appended by rank 0: one line per minibatch (step, epoch,
  loss, step time, world size, learning rate) and one per lifecycle event
  (``started``, ``stopped``, ``done``; ``checkpoints_damaged`` from every
  rank, just before they all exit non-zero).
* ``checkpoints/`` — see ``ringleader.job.checkpoint``.

Files rather than sockets: they outlive a crashed controller, need no ports,
and a restarted controller finds the whole story where it left it.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from ringleader.job.records import MAX_LINE, progress_lines, progress_record, read_regular

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
    """Atomically replace the job's control file.

    Not ``fsync``-ed: it speaks to processes that a machine crash ends too,
    and a controller that starts after one settles them and writes a new
    file for the next generation. The wait for the disk was a few
    milliseconds of every launch, in the moment a GPU changes hands.
    """
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
    os.fchmod(fd, 0o644)  # the job may run as another user, who must read it
    with os.fdopen(fd, "w") as f:
        f.write(payload)
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
    """Append one record; a non-finite number (a diverged loss) is written as null.

    JSON has no NaN, and the scheduler refuses lines that carry one
    (``ringleader.job.records``), so a diverged loss must not cost the step.
    """
    clean = {
        k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in record.items()
    }
    line = json.dumps(clean, separators=(",", ":"), allow_nan=False) + "\n"
    with open(job_dir / PROGRESS, "a", encoding="utf-8") as f:
        f.write(line)
        f.flush()


class ProgressReader:
    """Reads the progress lines appended since the last call (complete lines only)."""

    def __init__(self, path: Path, offset: int = 0) -> None:
        self.path = path
        self.offset = offset
        self.bad = 0
        """Lines skipped as bad since this reader was made (``ringleader.job.records``)."""
        self._moved: ProgressReader | None = None
        """The file the last ``rotate`` moved away, read on until the next rotation: a
        writer that opened it just before the move appends its record there after."""

    def read_new(self) -> list[dict[str, Any]]:
        """Up to ``MAX_READ`` bytes of complete new lines; the rest at the next call."""
        late = self._drain_moved()
        return late + self._read_own() if late else self._read_own()

    def _drain_moved(self) -> list[dict[str, Any]]:
        moved = self._moved
        if moved is None:
            return []
        records: list[dict[str, Any]] = []
        while True:
            before, bad = moved.offset, moved.bad
            records += moved.read_new()
            self.bad += moved.bad - bad
            if moved.offset == before:
                return records

    def _read_own(self) -> list[dict[str, Any]]:
        chunk = read_regular(self.path, self.offset, MAX_READ)
        if chunk is None:
            return []
        if not chunk and _size(self.path) < self.offset:
            self.offset = 0  # truncated or replaced by an operator: start over
            return []
        end = chunk.rfind(b"\n")
        if end < 0:
            if len(chunk) > MAX_LINE:  # one endless line: skip it rather than wait forever
                self.offset += len(chunk)
                self.bad += 1
            return []
        self.offset += end + 1
        records, bad = progress_lines(chunk[: end + 1])
        self.bad += bad
        return records

    def rotate(self, cap: int) -> list[dict[str, Any]]:
        """Past ``cap`` bytes, move the file to ``<name>.1`` and return what was left unread.

        The job library opens the file per record, so its next one starts a
        new file; records it appended since the last read are in the moved
        one and are read here, before this reader turns to the new file.
        """
        if cap <= 0 or _size(self.path) <= cap:
            return []
        records = self._drain_moved()  # the last word of the file moved before, as it goes
        old = self.path.with_name(self.path.name + ".1")
        try:
            os.replace(self.path, old)
        except OSError:
            return records
        self._moved = ProgressReader(old, self.offset)
        records += self._drain_moved()
        self.offset = 0
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
    record = last_record(path, generation, kinds)
    return None if record is None else str(record["event"])


def last_record(path: Path, generation: int, kinds: tuple[str, ...]) -> dict[str, Any] | None:
    """The checked record of ``last_event``, for what else the event says (``why``)."""
    size = _size(path)
    start = max(0, size - TAIL_BYTES)
    chunk = read_regular(path, start, TAIL_BYTES)
    if not chunk:
        return None
    for raw in reversed(chunk.splitlines()):
        rec = progress_record(raw)
        if rec is not None and rec.get("g") == generation and rec.get("event") in kinds:
            return rec
    return None


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
