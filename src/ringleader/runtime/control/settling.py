"""Settling: what became of a job whose gang ended.

A gang ends because it finished training, was stopped for a resize, a
migration or a preemption, was cancelled, crashed, lost its node, or never
fully started. The controller's look at the gang decides *that* it ended;
this decides *what it means* for the job, from the job's own last word in its
progress file, the exit codes and why we asked it to stop: succeeded,
queued again (to resume from its checkpoint), restarting after a failure
within its retries, or failed, with the end of each rank's log as the reason.
"""

from __future__ import annotations

from collections.abc import MutableSet
from pathlib import Path
from typing import TYPE_CHECKING

from ringleader.job.control import CHECKPOINTS, PROGRESS, last_event, last_record
from ringleader.job.records import read_regular
from ringleader.runtime.control import lingering
from ringleader.runtime.control.acting import SIGNALLED
from ringleader.runtime.control.gangs import Gangs
from ringleader.runtime.control.stalls import STALLED
from ringleader.runtime.state.rows import JobRow, State
from ringleader.runtime.state.store import Store
from ringleader.runtime.state.wording import gang_failed

if TYPE_CHECKING:
    from ringleader.runtime.control.config import ControllerConfig

LOG_TAIL_BYTES = 64 << 10
"""How much of the end of each rank's log a failed job's error quotes from."""


def log_tail(job_dir: Path, lines: int = 20) -> str:
    """The last lines of every rank's log, for a failed job's error message."""
    out = []
    for path in sorted((job_dir / "logs").glob("rank*.log")):
        # Only the end of each log, and only a regular file: the job wrote it.
        try:
            size = path.lstat().st_size
        except OSError:
            continue
        raw = read_regular(path, max(0, size - LOG_TAIL_BYTES), LOG_TAIL_BYTES)
        if raw is None:
            continue
        text = raw.decode(errors="replace").splitlines()
        out.append(f"[{path.stem}] " + "\n".join(text[-lines:]))
    return "\n".join(out)[-4000:]


class Settling:
    """Settles ended gangs into the store; see the module docstring."""

    def __init__(
        self, store: Store, config: ControllerConfig, gangs: Gangs, suspended: MutableSet[str]
    ) -> None:
        self.store = store
        self.config = config
        self.gangs = gangs
        self.suspended = suspended
        """Jobs whose gang is suspended (``ProgressIngest.suspended``): a settled one is not."""

    def ran_to_end(
        self, row: JobRow, generation: int, reason: str | None, codes: dict[int, int], killed: bool
    ) -> bool:
        """Whether a gang that exited without failing finished the job's training.

        The job library says so itself: its last event is ``done`` or
        ``stopped``. Without either (a command that does not use the library)
        a clean exit of every rank is the command ending on its own, unless we
        killed it (node lost, ranks that never started, ``killed`` after a stop
        that did not come).
        """
        said = last_event(self.config.job_dir(row.id) / PROGRESS, generation, ("done", "stopped"))
        if said is not None:
            return said == "done"
        if reason in ("node_lost", "placement_timeout", "launch_lost", STALLED) or killed:
            return False
        if SIGNALLED in row.shape:
            return False  # it ended because we asked it to: a checkpoint, not the end
        return bool(codes) and all(code == 0 for code in codes.values())

    def _end_generation(self, row: JobRow, now: float) -> None:
        """What every settled gang leaves behind: no stop pending, no devices, no clocks."""
        row.stopping = None
        row.state_since = now
        self.suspended.discard(row.id)
        row.workers, row.devices = 0, []
        self.gangs.forget(row.id)  # the next generation starts with clean clocks
        row.shape.pop(SIGNALLED, None)

    def settle(self, row: JobRow, *, failed: bool, codes: dict[int, int], now: float) -> None:
        reason, gen = row.stopping, row.generation
        done = self.ran_to_end(row, gen, reason, codes, self.gangs.of(row.id).stop_killed)
        self._end_generation(row, now)
        if reason == "cancel":
            row.state, row.finished_at = State.CANCELLED, now
            self.store.save(row, "cancelled", generation=gen)
        elif not failed and done:
            row.state, row.finished_at = State.SUCCEEDED, now
            self.store.save(row, "succeeded", generation=gen, step=row.step)
        elif not failed:
            row.state = State.QUEUED
            self.store.save(row, "stopped", generation=gen, reason=reason, step=row.step)
        else:
            row.attempts += 1
            ours = {} if reason is None else {"reason": reason}  # a stall
            tail = log_tail(self.config.job_dir(row.id))
            row.error = f"{gang_failed(gen, codes)}\n{tail}"
            said = self.cannot_go_on(row.id, gen)
            if said is not None:
                # Every retry would meet the same damage, or the same rate: failed now.
                code, why = said
                row.error = f"{why}\n{row.error}"
                row.state, row.finished_at = State.FAILED, now
                self.store.save(row, "failed", generation=gen, codes=codes, reason=code)
            elif row.attempts <= row.spec.retries:
                row.state = State.QUEUED
                self.store.save(
                    row, "restarting", generation=gen, codes=codes, attempt=row.attempts, **ours
                )
            else:
                row.state, row.finished_at = State.FAILED, now
                self.store.save(row, "failed", generation=gen, codes=codes, **ours)

    def lingered(self, row: JobRow, ended: tuple[int, ...], grace_s: float, now: float) -> None:
        """Succeeded, saying which ranks were ended for staying once the work was done."""
        self._end_generation(row, now)
        row.state, row.finished_at = State.SUCCEEDED, now
        self.store.save(
            row,
            "succeeded",
            generation=row.generation,
            step=row.step,
            ended_ranks=list(ended),
            warning=lingering.warning(ended, grace_s),
        )

    def cannot_go_on(self, job_id: str, generation: int) -> tuple[str, str] | None:
        """Why a gang ended that no retry would mend, as (code, error), if it said so.

        The job library says so before it exits non-zero: every checkpoint is
        damaged (``checkpoints_damaged``, unless ``on_bad_checkpoint`` is
        ``restart``), or the weights stopped being finite (``diverged``, unless
        ``on_non_finite`` is ``continue``).
        """
        job_dir = self.config.job_dir(job_id)
        events = ("checkpoints_damaged", "diverged")
        said = last_record(job_dir / PROGRESS, generation, events)
        if said is None:
            return None
        why = str(said.get("why", "no reason given"))[:300]
        if said.get("event") == "diverged":
            return "diverged", f"{why} (failed at once: a retry would meet the same rate)"
        return "checkpoints_damaged", (
            f"every checkpoint in {job_dir / CHECKPOINTS} is damaged ({why}); failed rather "
            "than start over from step 0. Submit the job again to start over, or give "
            "`on_bad_checkpoint: restart` in a spec to have the job start over by itself."
        )
