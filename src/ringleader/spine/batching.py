"""The batch a job that adapts it is launched with: the most goodput on the GPUs it gets.

The size stage gave the job its GPUs weighing its goodput at its best batch
there (``perf.gradient.online_goodput``); the launch then hands it that
batch, by the same online model and the same reported statistics, so what
the job runs is what the policy sized it for. Before it has said anything of
its gradient it takes ``global_min``, the batch its learning rate was tuned at;
until its step times at two sizes give a fit (its kin's count: ``spine.kin``),
each GPU keeps the share it had (the prior of perfect scaling says nothing of
what a larger share costs).

A share is the examples a GPU takes per optimizer step; where it is more than
``per_gpu_max``, the GPU takes it in micro-batches that accumulate
(``perf.gradient.split_share``), so a job on one GPU may still take a large
batch, and ``global_min`` need not fit on ``min_gpus`` at once.

Both bodies choose here: the runtime as it launches a row's processes, the
simulator as it launches a job whose profile takes the batch it is handed
(``sim.playing``), each from the job's view as the policy last saw it.

A batch is chosen only at a launch, and one chosen before the job reported
its gradient is ``global_min``, which it would keep for as long as nothing
resizes it. ``rebatched`` names the running jobs whose best batch on the GPUs
they hold has moved far from theirs, where the gain wins their restart back:
each body relaunches them on the same GPUs after its decision.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np

from ringleader.perf.gradient import GradientReport, best_batch, split_share
from ringleader.perf.speed import SpeedModel
from ringleader.policy.model.plan import Plan
from ringleader.policy.model.views import JobView
from ringleader.policy.profile.sources import Online, with_kin
from ringleader.policy.size.payback import won_back

REBATCH_GAIN = 1.5
"""A running job is relaunched for its best batch only where that makes at least this
much more goodput on its GPUs than the batch it runs at: a share a little off its best
is not worth a restart, and the fit that says so is learnt online."""


@dataclass(frozen=True, slots=True)
class BatchBounds:
    """What a spec's ``batch`` allows: the global batch's range, and one GPU's most at once."""

    global_min: int
    global_max: int
    per_gpu_max: int


def launch_share(job: JobView, gpus: int, bounds: BatchBounds, per_node: int) -> tuple[int, int]:
    """``(micro-batch, accumulate)``: what each of ``gpus`` GPUs takes per optimizer
    step, for ``job`` on nodes of at most ``per_node`` GPUs."""
    report = job.gradient
    least = math.ceil(bounds.global_min / gpus)
    if report is None:
        share = least
    elif len(with_kin(job)) < 2:
        share = max(job.shape.batch_per_worker, least)
    else:
        model, _ = Online.plain_model(job, per_node)
        share = best_batch(model, report, gpus)
    return _split(share, gpus, bounds)


def _split(share: int, gpus: int, bounds: BatchBounds) -> tuple[int, int]:
    """``share`` examples a GPU as ``(micro-batch, accumulate)``, within ``bounds``."""
    least = math.ceil(bounds.global_min / gpus)
    return split_share(
        max(share, 1), bounds.per_gpu_max, least=least, most=bounds.global_max // gpus
    )


def rebatched(
    plan: Plan, views: Sequence[JobView], batched: Collection[str], per_node: int
) -> frozenset[str]:
    """The jobs of ``batched`` (those that take their batch at a launch) that ``plan``
    keeps running where they run, and whose best batch there gives ``REBATCH_GAIN``
    times their present one's goodput and wins their restart back: to relaunch on the
    same GPUs, at the batch ``launch_share`` then gives."""
    if not batched:
        return frozenset()
    chosen = []
    for view in views:
        if view.id not in batched or not view.workers or view.suspended:
            continue
        target = plan.of(view.id)
        if not target.running or target.active_devices != view.devices:
            continue  # the plan moves it: its launch takes the best batch anyway
        if _worth_a_restart(view, per_node):
            chosen.append(view.id)
    return frozenset(chosen)


def _worth_a_restart(job: JobView, per_node: int) -> bool:
    report = job.gradient
    if report is None or len(with_kin(job)) < 2 or job.remaining_fraction <= 0:
        return False
    bounds = BatchBounds(
        report.smallest_batch,
        report.largest_batch,
        report.per_gpu_max or report.largest_batch,
    )
    gpus = job.workers
    model, _ = Online.plain_model(job, per_node)  # ``launch_share``'s, as it has two sizes
    micro, accumulate = _split(best_batch(model, report, gpus), gpus, bounds)
    now = _goodput(model, report, gpus, job.shape.batch_per_worker)
    best = _goodput(model, report, gpus, micro * accumulate)
    if not (now > 0 and best >= REBATCH_GAIN * now):
        return False
    steps = job.remaining_fraction * job.epochs.at(1) * job.shape.examples_per_epoch
    steps /= report.smallest_batch
    return won_back(steps / now, steps / best, job.restart_s)


def _goodput(model: SpeedModel, report: GradientReport, gpus: int, share: float) -> float:
    """Steps at ``global_min`` a second on ``gpus`` GPUs taking ``share`` examples each."""
    seconds = model.step_time(gpus, share)
    if not (seconds > 0 and math.isfinite(seconds)):
        return 0.0
    return float(report.gains(np.asarray([share * gpus], dtype=float))[0]) / seconds
