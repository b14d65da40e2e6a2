"""A job model that is a measurement first: step times by placement and batch, and efficiency.

``MeasuredJob`` is one application as profiled: its step-time table
(``perf.placements``), its gradient statistics per epoch (``perf.efficiency``)
and the batch limits it was measured within. A job of it keeps a fixed global
batch ``M`` (as Pollux's and Sia's jobs do): on ``K`` GPUs each takes
``ceil(M / K)`` examples a step, split into ``s + 1`` micro-batches no larger
than the largest per-GPU batch measured (gradient accumulation), so an
iteration takes ``s`` compute-only steps and one full step (SPEC E2, with the
measured compute and sync parts instead of fitted ones).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

from ringleader.perf.efficiency import Efficiency, read_efficiency
from ringleader.perf.placements import Placement, StepTable, read_step_table
from ringleader.perf.profile_files import ProfileError

_EPS = 1e-8
"""Tolerance of the ceilings below: 4096 / 4 is 1024 examples, not 1025."""


@dataclass(frozen=True, slots=True)
class BatchSplit:
    """How ``K`` GPUs make one iteration of a global batch: per-GPU micro-batch, extra steps."""

    gpus: int
    micro_batch: int
    """Examples each GPU computes per step (the table's per-GPU batch)."""
    accumulation: int
    """Compute-only steps before the one that synchronises (``s``)."""

    @property
    def global_batch(self) -> int:
        """Examples per iteration, as split (a little over the asked-for batch by rounding)."""
        return self.gpus * self.micro_batch * (self.accumulation + 1)


@dataclass(frozen=True)
class MeasuredJob:
    """One profiled application: what a job of it costs per step and how many steps it needs."""

    name: str
    table: StepTable
    efficiency: Efficiency
    max_micro_batch: int
    """The largest per-GPU batch a step may take (memory): beyond it, accumulate."""
    min_micro_batch: int

    @property
    def smallest_batch(self) -> int:
        return self.efficiency.smallest_batch

    @property
    def largest_batch(self) -> int:
        return self.efficiency.largest_batch

    def split(self, gpus: int, global_batch: int) -> BatchSplit:
        """``global_batch`` over ``gpus`` GPUs, accumulating where a GPU's share is too big.

        One GPU above the smallest batch accumulates at least once: Pollux's rule, as
        its gradient statistics need two micro-batches to be measured on one GPU.
        """
        share = math.ceil(global_batch / gpus - _EPS)
        accumulation = math.ceil(share / self.max_micro_batch - _EPS) - 1
        if gpus == 1 and global_batch > self.smallest_batch:
            accumulation = max(1, accumulation)
        micro = math.ceil(share / (accumulation + 1) - _EPS)
        micro = min(micro, int(self.largest_batch / (gpus * (accumulation + 1))))
        return BatchSplit(gpus, micro, accumulation)

    def iteration_s(self, placement: Placement, global_batch: int) -> float:
        """Seconds for one iteration of ``global_batch`` on ``placement``."""
        split = self.split(sum(placement), global_batch)
        step, sync = self.table.times(placement, split.micro_batch)
        return step + split.accumulation * (step - sync)

    def seconds(self, placement: Placement, global_batch: int) -> float:
        """Wall time to train from the start to done at a constant placement and batch."""
        split = self.split(sum(placement), global_batch)
        steps = self.efficiency.steps_to_finish(split.global_batch)
        return steps * self.iteration_s(placement, global_batch)

    def on(self, table: StepTable, max_micro_batch: int | None = None) -> MeasuredJob:
        """The same application measured on other GPUs: ``table``'s step times and batch
        limits, the same gradient statistics (they are the model's, not the GPU's)."""
        lo, hi = table.batch_range
        largest = int(hi) if max_micro_batch is None else max_micro_batch
        return replace(self, table=table, max_micro_batch=largest, min_micro_batch=int(lo))

    def check_batch(self, global_batch: int) -> None:
        """Raise ``ProfileError`` where ``global_batch`` is outside the validated range."""
        lo, hi = self.smallest_batch, self.largest_batch
        if not lo <= global_batch <= hi:
            raise ProfileError(
                f"{self.name}: global batch {global_batch} is outside the measured range "
                f"{lo}-{hi}; pick a batch between them"
            )


def read_measured_job(
    folder: Path,
    *,
    epochs: int | None,
    max_micro_batch: int | None = None,
    placements: str = "placements.csv",
    scalability: str | None = None,
) -> MeasuredJob:
    """One application's profile folder (Pollux's layout: ``placements.csv``,
    ``scalability.csv``, ``validation-<batch>.csv``), trained for ``epochs`` (None:
    every epoch of the shortest validation run). ``placements`` and ``scalability``
    name the step-time files where they are not Pollux's (``read_step_table``)."""
    if not folder.is_dir():
        raise ProfileError(f"{folder}: no such profile folder")
    table = read_step_table(folder, placements, scalability)
    efficiency = read_efficiency(folder, epochs)
    lo, hi = table.batch_range
    largest = int(hi) if max_micro_batch is None else max_micro_batch
    return MeasuredJob(folder.name, table, efficiency, largest, int(lo))
