"""The batch a row that adapts it is launched with (``spine.batching`` chooses it).

The runtime's half: the row's view as the policy saw it, its kin's step times
from the server's book, and the spec's bounds, into the ``LaunchBatch`` the
job library reads from ``RINGLEADER_BATCH``.
"""

from __future__ import annotations

from ringleader.job.batching import LaunchBatch
from ringleader.policy.model.needs import Needs
from ringleader.policy.model.views import ClusterView
from ringleader.runtime.control.rowview import row_view
from ringleader.runtime.state.rows import JobRow
from ringleader.spine.batching import BatchBounds, launch_share
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
    limits = BatchBounds(bounds.global_min, bounds.global_max, bounds.per_gpu_max)
    per_gpu, accumulate = launch_share(view, gpus, limits, cluster.widest_node)
    return LaunchBatch(
        bounds.global_min, bounds.global_max, bounds.per_gpu_max, per_gpu, accumulate
    )
