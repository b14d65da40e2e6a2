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
"""

from __future__ import annotations

import math

from ringleader.job.batching import LaunchBatch
from ringleader.perf.gradient import best_batch, split_share
from ringleader.policy.model.needs import Needs
from ringleader.policy.model.views import ClusterView
from ringleader.policy.profile.sources import Online, with_kin
from ringleader.runtime.control.rowview import row_view
from ringleader.runtime.state.rows import JobRow
from ringleader.spine.kin import KinBook


def launch_batch(
    row: JobRow, gpus: int, cluster: ClusterView, book: KinBook | None = None
) -> LaunchBatch | None:
    """What ``row`` takes per GPU on ``gpus`` GPUs (None: its spec keeps the script's);
    ``book``: its kin's step times, which count as sizes it was timed at."""
    bounds = row.spec.batch
    if bounds is None:
        return None
    needs = Needs(speed_model=True)
    view = row_view(row, cluster, None, needs=needs, restart_s=0.0, book=book)
    report = view.gradient
    least = math.ceil(bounds.global_min / gpus)
    if report is None:
        share = least
    elif len(with_kin(view)) < 2:
        share = max(view.shape.batch_per_worker, least)
    else:
        model, _ = Online.plain_model(view, cluster.widest_node)
        share = best_batch(model, report, gpus)
    per_gpu, accumulate = split_share(
        max(share, 1), bounds.per_gpu_max, least=least, most=bounds.global_max // gpus
    )
    return LaunchBatch(
        bounds.global_min, bounds.global_max, bounds.per_gpu_max, per_gpu, accumulate
    )
