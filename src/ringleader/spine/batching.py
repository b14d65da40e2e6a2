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
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ringleader.perf.gradient import best_batch, split_share
from ringleader.policy.model.views import JobView
from ringleader.policy.profile.sources import Online, with_kin


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
    return split_share(
        max(share, 1), bounds.per_gpu_max, least=least, most=bounds.global_max // gpus
    )
