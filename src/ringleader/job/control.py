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

import json
import os
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
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except FileNotFoundError:
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
