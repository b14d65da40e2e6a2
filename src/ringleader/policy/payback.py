"""Resize a running job only where the restart it costs is won back.

A resize is a checkpoint, a stop and a restart: seconds in which the job's
GPUs do nothing (``JobView.restart_s``, measured by the body). Growing a
running job from ``w`` to ``n`` workers is worth that only if the remaining
time it saves, ``R(w) − R(n)``, exceeds the restart by a margin; the margin
absorbs the noise of a model fitted online. A grow that does not pay is
undone, and the GPUs it would have taken go to the jobs that can use them.

Shrinks are left alone: they free GPUs for jobs that wait, which the
allocator has already weighed.
"""

from __future__ import annotations

from collections.abc import Sequence

from ringleader.policy.allocator import Counts
from ringleader.policy.objective import Candidate

MARGIN = 2.0
"""A grow must save at least this many restarts' worth of the job's time."""


def unpaid_grows(known: Sequence[Candidate], counts: Counts) -> Counts:
    """Running jobs whose planned grow does not pay for its restart, at their current size."""
    keep: Counts = {}
    for c in known:
        job = c.job
        now, planned = job.workers, counts.get(job.id, 0)
        if now == 0 or job.suspended or planned <= now or c.speed is None or not c.measured:
            continue
        if job.restart_s <= 0:
            continue
        saved = c.remaining_seconds(now) - c.remaining_seconds(planned)
        if saved < MARGIN * job.restart_s:
            keep[job.id] = now
    return keep
