"""Resize a running job only where the restart it costs is won back.

A resize is a checkpoint, a stop and a restart: seconds in which the job's
GPUs do nothing (``JobView.restart_s``, measured by the body). Growing a
running job from ``w`` to ``n`` workers is worth that only if the remaining
time it saves, ``R(w) − R(n)``, exceeds the restart by a margin; the margin
absorbs the noise of a model fitted online. The greedy allocators ask
``pays`` before every step that would take a running job past its current
size, so a grow that does not pay is never planned and its GPUs go to the
jobs that can use them.

Shrinks are left alone: they free GPUs for jobs that wait, which the
allocator has already weighed.
"""

from __future__ import annotations

from ringleader.policy.model.objective import Candidate

MARGIN = 2.0
"""A grow must save at least this many restarts' worth of the job's time."""


def pays(c: Candidate, size: int) -> bool:
    """Whether running ``c`` at ``size`` workers is worth the restart it may cost."""
    job = c.job
    now = job.workers
    if now == 0 or job.suspended or size <= now or job.restart_s <= 0:
        return True  # not running, or not a grow past where it runs, or free to restart
    if c.speed is None or not c.measured:
        return True  # nothing to predict the saving from: the allocator's own rule decides
    return won_back(c.remaining_seconds(now), c.remaining_seconds(size), job.restart_s)


def won_back(now_s: float, after_s: float, restart_s: float) -> bool:
    """Whether a grow from ``now_s`` remaining seconds to ``after_s`` wins back a restart of
    ``restart_s`` (with the margin): ``pays``'s test, for a caller that has the remaining
    seconds at hand (a walk of kept chains has each step's, and the job's now once)."""
    return now_s - after_s >= MARGIN * restart_s


def may_refuse(c: Candidate) -> bool:
    """Whether ``pays`` may say no to some grow of ``c``: only to a running, measured job
    whose restart costs time. Where it may not, a greedy can skip asking step by step."""
    job = c.job
    return (
        job.workers > 0
        and not job.suspended
        and job.restart_s > 0
        and c.speed is not None
        and c.measured
    )


def saved_by(c: Candidate, size: int) -> float:
    """The remaining seconds growing running ``c`` to ``size`` saves, as ``pays`` weighs it
    (meaningful where ``pays`` weighs it: a grow of a running, measured job)."""
    return c.remaining_seconds(c.job.workers) - c.remaining_seconds(size)
