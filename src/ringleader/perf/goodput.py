"""Goodput: progress per second, the speed a job that picks its own batch maximises.

A step at global batch ``M`` on a placement takes ``T(placement, M)`` seconds
(``MeasuredJob.iteration_s``) and makes ``gain(M, epoch)`` steps of progress at
the smallest batch (``Efficiency.gain``), so its goodput is ``gain / T`` (SPEC
E2: throughput times statistical efficiency, in steps at ``M0`` rather than
examples). A job that adapts its batch (Pollux's, AdaptDL's) takes, on each
placement and in each epoch, the batch with the best goodput; as Pollux does,
it tries fifty batches spaced geometrically from the smallest its GPUs can
take to the largest validated, each split into micro-batches the table holds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ringleader.perf.measured import BatchSplit, MeasuredJob
from ringleader.perf.placements import OutsideMeasurements, Placement
from ringleader.perf.speed import MeasuredSpeed

TRIED = 50
"""Global batches tried per placement (Pollux's ``GoodputFunction.optimize``)."""
_STEPS = np.arange(TRIED, dtype=np.float64)


def tried_batches(low: float, high: float) -> np.ndarray:
    """``np.geomspace(low, high, TRIED)``, value for value, without its overhead: a
    goodput size stage asks for it once per job and GPU count at every decision."""
    a, b = np.log10(float(low)), np.log10(float(high))
    y = _STEPS * ((b - a) / (TRIED - 1)) + a
    y[-1] = b
    out: np.ndarray = np.power(10.0, y)
    out[0], out[-1] = low, high
    return out


def tried_grid(low: np.ndarray, high: float) -> np.ndarray:
    """``tried_batches(low[i], high)`` as row ``i``, in one array expression."""
    a, b = np.log10(low)[:, None], np.log10(float(high))
    y = _STEPS * ((b - a) / (TRIED - 1)) + a
    y[:, -1] = b
    out: np.ndarray = np.power(10.0, y)
    out[:, 0], out[:, -1] = low, high
    return out


def best_split(job: MeasuredJob, placement: Placement, epoch: int) -> tuple[float, BatchSplit]:
    """The best goodput on ``placement`` in ``epoch``, and the batch split that makes it.

    Raises ``OutsideMeasurements`` where no batch the job may take was measured there.
    """
    gpus = sum(placement)
    low = max(job.smallest_batch, job.min_micro_batch * gpus)
    high = job.largest_batch
    if low <= high:
        share = tried_batches(low, high) / gpus
        accumulation = np.ceil(share / job.max_micro_batch - 1e-8) - 1
        if gpus == 1:
            lifted = np.maximum(accumulation, 1)
            accumulation = np.where(share > job.smallest_batch + 1e-8, lifted, accumulation)
        micro = np.ceil(share / (accumulation + 1) - 1e-8)
        # Rounding up must not take the batch past the largest validated one.
        micro = np.minimum(micro, np.floor(high / (gpus * (accumulation + 1))))
        valid = (micro >= job.min_micro_batch) & (micro <= job.max_micro_batch)
        if valid.any():
            micro, accumulation = micro[valid], accumulation[valid]
            times = job.table.times_many(placement, micro)
            seconds = times[:, 0] + accumulation * (times[:, 0] - times[:, 1])
            batches = gpus * micro * (accumulation + 1)
            rates = job.efficiency.gains(batches, epoch) / seconds
            if np.isfinite(rates).any():
                i = int(np.nanargmax(rates))
                split = BatchSplit(gpus, int(micro[i]), int(accumulation[i]))
                return float(rates[i]), split
    raise OutsideMeasurements(
        f"{job.name}: no batch between {low} and {high} was measured on {placement}"
    )


@dataclass(frozen=True, slots=True)
class GoodputSpeed(MeasuredSpeed):
    """What a policy that weighs goodput is told of a job that picks its own batch: the
    step times at its submitted batch (``MeasuredSpeed``), and its best goodput."""

    best_at: Callable[[int, float], float] | None = None
    """Progress per second at the best batch on ``gpus`` GPUs laid out compactly, with
    ``done`` of the job done (its epoch's gradient statistics set the best batch)."""

    best_upto: Callable[[int, float], np.ndarray] | None = None
    """``best_at`` on 1 .. ``most`` GPUs (index ``k - 1``), where the model tells many
    counts in one array expression (None: ask ``best_at`` count by count)."""

    def goodput(self, gpus: int, done: float) -> float:
        assert self.best_at is not None
        return self.best_at(gpus, done)

    def goodputs(self, most: int, done: float) -> np.ndarray:
        """``goodput`` on 1 .. ``most`` GPUs, index ``k - 1``."""
        if self.best_upto is not None:
            return self.best_upto(most, done)
        return np.asarray([self.goodput(k, done) for k in range(1, most + 1)], dtype=np.float64)
