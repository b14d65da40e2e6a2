"""What a job that adapts its batch reports of its gradient, and the goodput it implies.

A job that may change its batch (Pollux's, AdaptDL's) measures, as it trains,
the squared norm and the variance of its gradient at the batch it takes; from
the two, one step at global batch ``M`` is worth ``(var + sqr) / (var / r +
sqr)`` steps at the smallest batch ``M0`` (``r = M / M0``; SPEC E1). With a
speed model fitted from its step times, that is all a scheduler needs to weigh
its goodput on ``k`` GPUs at every batch it may take (``GradientReport``,
``online_goodput``): no oracle, only what the job said so far.

What one GPU holds bounds a micro-batch, not the batch: a share of the
global batch above ``per_gpu_max`` is split into micro-batches whose
gradients accumulate before one optimizer step (``split_share``, by the rule
of ``perf.goodput.best_split``), so a job on few GPUs may still take any
batch up to its largest.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ringleader.perf.goodput import GoodputSpeed, tried_batches, tried_grid
from ringleader.perf.overlap import OverlapSpeed
from ringleader.perf.speed import MeasuredSpeed, SpeedModel, job_fields


@dataclass(frozen=True, slots=True)
class GradientReport:
    """A job's latest gradient statistics, and the batches it may take."""

    grad_sqr: float
    grad_var: float
    smallest_batch: int
    """``M0``: the batch its progress is counted in (and the least it takes)."""
    largest_batch: int
    """The most examples a step may take, over all its GPUs (whatever one GPU holds:
    micro-batches accumulate past it)."""
    per_gpu_max: int | None = None
    """The most examples one GPU computes at once (past it, micro-batches; None: not
    said, and a share is timed as one pass)."""

    @property
    def noise_scale(self) -> float:
        """``tr Σ / |G|²`` in examples: the batch past which a larger one helps little
        (infinite where ``|G|²`` is not above 0: the noise swamps the gradient)."""
        if self.grad_sqr <= 0:
            return math.inf
        return self.grad_var * self.smallest_batch / self.grad_sqr

    def batch_range(self, gpus: int) -> tuple[int, int]:
        """The least and most examples a step on ``gpus`` GPUs may take (least > most:
        none fits)."""
        return max(self.smallest_batch, gpus), self.largest_batch

    def gains(self, batches: np.ndarray) -> np.ndarray:
        """Steps at ``M0`` that one step at each global batch is worth."""
        scale = batches / self.smallest_batch
        denominator = self.grad_var / scale + self.grad_sqr
        if self.grad_sqr > 0 and self.grad_var >= 0:  # every denominator positive
            return (self.grad_var + self.grad_sqr) / denominator
        safe = np.where(denominator > 0, denominator, 1.0)
        return np.where(denominator > 0, (self.grad_var + self.grad_sqr) / safe, 1.0)


def best_goodput(model: SpeedModel, report: GradientReport, gpus: int) -> float:
    """Progress per second (steps at ``M0``) at the best batch on ``gpus`` GPUs, by
    ``model``'s step times: fifty batches tried, as ``perf.goodput.best_split`` does.

    ``model`` is fitted from what the job reported, each step time beside the
    examples each GPU took in it, accumulated micro-batches included: so it
    answers for a whole iteration at any per-GPU share of the batch.
    """
    rate, _ = _best(model, report, gpus)
    return rate


def best_batch(model: SpeedModel, report: GradientReport, gpus: int) -> int:
    """The examples each of ``gpus`` GPUs should take per optimizer step for the most
    goodput by ``model`` (a whole number, so that every GPU takes the same): what a job
    that adapts its batch is launched with, split by ``split_share`` where one GPU
    cannot hold it at once."""
    low, _ = report.batch_range(gpus)
    _, batch = _best(model, report, gpus)
    return max(round(batch / gpus), math.ceil(low / gpus), 1)


def split_share(
    share: int, per_gpu_max: int, *, least: int = 1, most: int | None = None
) -> tuple[int, int]:
    """``share`` examples per GPU per optimizer step as ``(micro-batch, accumulate)``:
    the fewest micro-batches of at most ``per_gpu_max`` that make it, all one size.

    Pollux's rule (``perf.goodput.best_split``): ``accumulate = ceil(share /
    per_gpu_max)``, each micro-batch ``ceil(share / accumulate)``. Rounding up may
    take more than ``most`` (the largest global batch's share); then one example
    less per micro-batch, where that still leaves ``least`` (the smallest's).
    """
    if share < 1 or per_gpu_max < 1:
        raise ValueError(f"need share >= 1 and per_gpu_max >= 1, got {share} and {per_gpu_max}")
    accumulate = math.ceil(share / per_gpu_max)
    micro = math.ceil(share / accumulate)
    if most is not None and micro * accumulate > most:
        lower = most // accumulate
        if lower >= 1 and lower * accumulate >= least:
            micro = min(micro, lower)
    return micro, accumulate


def _best(model: SpeedModel, report: GradientReport, gpus: int) -> tuple[float, float]:
    """The best goodput on ``gpus`` GPUs and the global batch that makes it (0 where no
    batch fits: the least batch is returned then)."""
    low, high = report.batch_range(gpus)
    if low > high:
        return 0.0, float(low)
    batches = tried_batches(low, high)
    seconds = model.step_times(gpus, batches / gpus)
    rates = report.gains(batches) / seconds
    at = int(np.argmax(rates))
    best = float(rates[at])
    if not (math.isfinite(best) and best > 0):
        return 0.0, float(low)
    return best, float(batches[at])


def best_goodputs(model: OverlapSpeed, report: GradientReport, most: int) -> np.ndarray:
    """``best_goodput`` on 1 .. ``most`` GPUs (index ``k - 1``), as one array expression:
    a goodput size stage asks every count of every job at each decision."""
    counts = np.arange(1.0, most + 1.0)
    low = np.maximum(float(report.smallest_batch), counts)
    batches = tried_grid(low, report.largest_batch)
    gpus = np.repeat(counts, batches.shape[1])
    seconds = model.step_times_on(gpus, (batches / counts[:, None]).ravel())
    with np.errstate(divide="ignore", invalid="ignore"):
        rates = report.gains(batches) / seconds.reshape(batches.shape)
    best = rates[np.arange(most), np.argmax(rates, axis=1)]
    fits = (low <= report.largest_batch) & np.isfinite(best) & (best > 0)
    out: np.ndarray = np.where(fits, best, 0.0)
    return out


@lru_cache(maxsize=8192)
def online_goodput(model: SpeedModel, report: GradientReport) -> GoodputSpeed:
    """``model`` told as a ``GoodputSpeed``: its step times at the batch the job keeps,
    and its best goodput on each count by ``report``'s statistics (memoised, and the
    whole answer kept per model and report: a body builds a running job's view anew
    at each decision, with the same step times and report). Pollux's overlap model
    tells every count up to the most asked for in one array expression."""
    measured = model.measured if isinstance(model, MeasuredSpeed) else ()
    if isinstance(model, OverlapSpeed):
        kept = [np.zeros(0)]

        def best_upto(most: int, done: float) -> np.ndarray:
            if len(kept[0]) < most:  # at least 16: it costs about what one count does
                kept[0] = best_goodputs(model, report, max(most, 2 * len(kept[0]), 16))
            return kept[0][:most]

        def from_upto(gpus: int, done: float) -> float:
            return float(best_upto(gpus, done)[gpus - 1])

        fields = job_fields(model)
        return GoodputSpeed(**fields, measured=measured, best_at=from_upto, best_upto=best_upto)
    memo: dict[int, float] = {}

    def best_at(gpus: int, done: float) -> float:
        found = memo.get(gpus)
        if found is None:
            found = memo[gpus] = best_goodput(model, report, gpus)
        return found

    return GoodputSpeed(**job_fields(model), measured=measured, best_at=best_at)
