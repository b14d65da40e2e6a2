"""A job's stored row as Python: its state and every field the store keeps.

One ``JobRow`` per job; the store reads and writes them whole (or, for a
running job's progress, only ``schema.PROGRESS_COLUMNS``). What the API
shows of a row is ``presentation``'s, not the row's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ringleader.perf.gradient import GradientReport
from ringleader.runtime.state.spec import JobSpec


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


def gradient(row: JobRow) -> GradientReport | None:
    """What the job last said of its gradient, where its spec lets the batch adapt (a job
    that keeps its batch is weighed by its speed alone, whatever it measures)."""
    bounds, shape = row.spec.batch, row.shape
    sqr, var = shape.get("grad_sqr", 0.0), shape.get("grad_var", -1.0)
    if bounds is None or not (sqr > 0 and var >= 0):
        return None  # none said yet, or early estimates that are not yet a gradient's
    return GradientReport(
        grad_sqr=sqr,
        grad_var=var,
        smallest_batch=bounds.global_min,
        largest_batch=bounds.global_max,
        per_gpu_max=bounds.per_gpu_max,
    )
