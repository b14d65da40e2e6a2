"""Folding what a running job reports (``progress.jsonl``) into its stored row.

Each look, the controller hands every running or suspended job to
``ProgressIngest.ingest``, which reads the lines the job appended since
the last look and folds them into the row: step, epoch and loss; the
job's shape (examples per epoch, batch, gradient size, memory); its
minibatch-time profile, alone per world size or packed per partner
(introspection compares the two); its measured restart cost after a
resize; and whether it uses the job library and has confirmed a suspend.
The controller saves the row's progress columns afterwards
(``Store.save_progress``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ringleader.job.control import ProgressReader, last_event
from ringleader.policy.model.views import Observation
from ringleader.runtime.state.rows import JobRow, State
from ringleader.spine.observe import fold

log = logging.getLogger("ringleader.controller")

WARMUP_STEPS = 2
"""Steps after each launch left out of the step-time profile (start-up, first allreduce)."""

LIBRARY_GENERATION = "library_generation"
"""Key in a row's ``shape``: the newest generation seen writing progress with the job library."""
STOP_ASKED = "stop_requested_at"
STOP_GENERATION = "stop_generation"
RESTART = "restart_s"
GRADIENT = ("grad_sqr", "grad_var")
"""Keys a job that measures its gradient noise reports (``job.batching.gradient_fields``),
kept in the row's ``shape`` as the latest said."""
"""Keys in a row's ``shape``: when a resize's stop was asked for, of which generation,
and the job's measured restart cost."""


class ProgressIngest:
    """Where each job's progress file was read to, and what it said of suspends."""

    def __init__(self, progress_cap_bytes: int) -> None:
        self.progress_cap_bytes = progress_cap_bytes
        self.suspended: set[str] = set()
        """Jobs that said they suspended (freed their device) and have not resumed."""
        self._readers: dict[str, ProgressReader] = {}
        self._steps: dict[tuple[str, int], int] = {}
        """Steps seen per (job, generation): the first few are warm-up."""

    def ingest(
        self, row: JobRow, path: Path, partners: Sequence[str] = (), gpu_type: str = ""
    ) -> None:
        """Fold the lines appended to ``path`` since the last look into ``row``.

        ``partners``: the jobs running on the same GPUs this look (packed);
        a step time measured beside them goes to the packed profile.
        ``gpu_type``: the one GPU type the gang runs on ("" for none or several);
        its step times are also kept for that type (``JobRow.type_observations``).
        """
        reader = self._readers.get(row.id)
        if reader is None:
            reader = ProgressReader(path, row.progress_offset)
            self._readers[row.id] = reader
            # A new reader starts past what an earlier server read, so a
            # suspend it saw confirmed is confirmed again from the file.
            if (
                row.state is State.SUSPENDED
                and last_event(path, row.generation, ("suspended", "resumed")) == "suspended"
            ):
                self.suspended.add(row.id)
        bad_before = reader.bad
        records = reader.read_new()
        records += reader.rotate(self.progress_cap_bytes)
        if reader.bad > bad_before:
            row.bad_lines += reader.bad - bad_before
            log.warning("%s: %d bad progress line(s) skipped", row.id, reader.bad - bad_before)
        for rec in records:
            if rec.get("g") != row.generation:
                continue
            # It writes progress: it uses the job library and obeys control.json.
            row.shape[LIBRARY_GENERATION] = row.generation
            event = rec.get("event")
            if event == "suspended":
                self.suspended.add(row.id)
                log.info("%s suspended at step %s", row.id, rec.get("step"))
            elif event == "resumed":
                self.suspended.discard(row.id)
                log.info("%s resumed at step %s", row.id, rec.get("step"))
            if "step" not in rec or event is not None:
                continue
            self._step(row, rec, partners, gpu_type)
        row.progress_offset = reader.offset

    def steps_seen(self, job_id: str, generation: int) -> int:
        """How many steps this server has read from the job's ``generation``."""
        return self._steps.get((job_id, generation), 0)

    def _step(
        self, row: JobRow, rec: dict[str, Any], partners: Sequence[str], gpu_type: str
    ) -> None:
        row.step = max(row.step, rec["step"])
        row.epoch = rec.get("epoch", row.epoch)
        row.loss = rec.get("loss")
        for key in ("examples_per_epoch", "batch_per_worker", "grad_bytes", *GRADIENT):
            if key in rec:  # checked finite by ``job.records``
                row.shape[key] = float(rec[key])
        if "memory_gib" in rec:
            row.shape["memory_gib"] = max(row.shape.get("memory_gib", 0.0), rec["memory_gib"])
        seen = self._steps.get((row.id, row.generation), 0) + 1
        self._steps[(row.id, row.generation)] = seen
        if seen == 1:
            measure_restart(row, rec.get("t"))
        if seen > WARMUP_STEPS and "step_time" in rec:
            t = float(rec["step_time"])
            batch = float(rec.get("batch_per_worker", 0))
            if partners:
                for other in partners:
                    record(row.packed, other, t, batch)
            else:
                world = str(int(rec.get("world_size", row.workers)))
                record(row.observations, world, t, batch)
                if gpu_type:
                    record(row.type_observations, f"{gpu_type}/{world}", t, batch)


def measure_restart(row: JobRow, first_step_at: object) -> None:
    """Fold the time from a resize's stop to the next generation's first step into
    the job's restart cost."""
    if row.shape.get(STOP_GENERATION, row.generation) >= row.generation:
        return  # no resize under way, or a step of the generation being stopped
    stopped_at = row.shape.pop(STOP_ASKED, None)
    row.shape.pop(STOP_GENERATION, None)
    if stopped_at is None or not isinstance(first_step_at, int | float):
        return
    seconds = float(first_step_at) - stopped_at
    if not 0 < seconds < 3600:
        return  # a clock step, or a stop long before the relaunch: not a restart
    old = row.shape.get(RESTART)
    row.shape[RESTART] = seconds if old is None else 0.5 * (old + seconds)


def profile(table: dict[str, list[float]]) -> dict[str, Observation]:
    """A stored profile ``{key: [mean, seconds, count, batch]}`` as observations."""
    return {k: Observation(v[0], v[1], int(v[3]) or 1) for k, v in table.items() if v[2] > 0}


def record(table: dict[str, list[float]], key: str, step_time: float, batch: float) -> None:
    """Fold one minibatch time into a [mean, seconds, count, batch] profile entry."""
    entry = table.get(key)
    seen = profile({key: entry}).get(key) if entry is not None else None
    count = int(entry[2]) if entry is not None else 0
    obs = fold(seen, step_time, step_time, int(batch))
    table[key] = [obs.step_time, obs.seconds, count + 1, float(obs.batch_per_worker)]
