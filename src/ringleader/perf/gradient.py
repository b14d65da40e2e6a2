"""What a job that adapts its batch reports of its gradient, and the goodput it implies.

A job that may change its batch (Pollux's, AdaptDL's) measures, as it trains,
the squared norm and the variance of its gradient at the batch it takes; from
the two, one step at global batch ``M`` is worth ``(var + sqr) / (var / r +
sqr)`` steps at the smallest batch ``M0`` (``r = M / M0``; SPEC E1). With a
speed model fitted from its step times, that is all a scheduler needs to weigh
its goodput on ``k`` GPUs at every batch it may take (``GradientReport``,
``online_goodput``): no oracle, only what the job said so far.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ringleader.perf.goodput import TRIED, GoodputSpeed
from ringleader.perf.speed import SpeedModel


@dataclass(frozen=True, slots=True)
class GradientReport:
    """A job's latest gradient statistics, and the batches it may take."""

    grad_sqr: float
    grad_var: float
    smallest_batch: int
    """``M0``: the batch its progress is counted in (and the least it takes)."""
    largest_batch: int
    """The most examples a step may take, over all its GPUs."""

    def gains(self, batches: np.ndarray) -> np.ndarray:
        """Steps at ``M0`` that one step at each global batch is worth."""
        scale = batches / self.smallest_batch
        denominator = self.grad_var / scale + self.grad_sqr
        safe = np.where(denominator > 0, denominator, 1.0)
        return np.where(denominator > 0, (self.grad_var + self.grad_sqr) / safe, 1.0)


def best_goodput(model: SpeedModel, report: GradientReport, gpus: int) -> float:
    """Progress per second (steps at ``M0``) at the best batch on ``gpus`` GPUs, by
    ``model``'s step times: fifty batches tried, as ``perf.goodput.best_split`` does.

    ``model`` is fitted from what the job reported, each step time beside the
    examples each GPU took in it, accumulated micro-batches included: so it
    answers for a whole iteration at any per-GPU share of the batch.
    """
    low = max(report.smallest_batch, gpus)
    high = report.largest_batch
    if low > high:
        return 0.0
    batches = np.geomspace(low, high, TRIED)
    seconds = np.asarray([model.step_time(gpus, m) for m in batches / gpus])
    rates = report.gains(batches) / seconds
    best = float(np.max(rates))
    return best if math.isfinite(best) and best > 0 else 0.0


def online_goodput(model: SpeedModel, report: GradientReport) -> GoodputSpeed:
    """``model`` told as a ``GoodputSpeed``: its step times at the batch the job keeps,
    and its best goodput on each count by ``report``'s statistics (memoised per count:
    a report holds until the job says more, and with it the view)."""
    memo: dict[int, float] = {}

    def best_at(gpus: int, done: float) -> float:
        found = memo.get(gpus)
        if found is None:
            found = memo[gpus] = best_goodput(model, report, gpus)
        return found

    return GoodputSpeed(
        theta=model.theta,
        algorithm=model.algorithm,
        grad_bytes=model.grad_bytes,
        batch_per_worker=model.batch_per_worker,
        examples_per_epoch=model.examples_per_epoch,
        rank=model.rank,
        global_batch=model.global_batch,
        measured=getattr(model, "measured", ()),
        best_at=best_at,
    )
