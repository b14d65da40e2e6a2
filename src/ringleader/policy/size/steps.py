"""A job's growth steps, as the greedy weighs them, and why a job's growth stops.

A step stage (``allocators``) says what growing a job from ``w`` workers adds
and saves; ``weigh`` turns that into the step the greedy ranks (its score is
the objective saved per added GPU), or into the note where the job's growth
stops for a reason of its own. The plain greedy (``growth``) and the kept
chains of ``_incremental`` read steps the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, Protocol

from ringleader.policy.model.objective import Candidate
from ringleader.policy.model.plan import (
    AT_MAX,
    NO_GAIN,
    OUTBID,
    RESTART_NOT_WON,
    UNMEASURED,
    Note,
    note,
)
from ringleader.policy.model.views import JobView
from ringleader.policy.size.payback import saved_by

Counts = dict[str, int]


Step = tuple[int, float, float]
"""A growth step as a step stage returns it: GPUs added, objective before, objective after."""


class StepOf(Protocol):
    def __call__(self, c: Candidate, w: int, /) -> Step | None: ...


Entry = tuple[int, int, float, float, float]
"""A step as the greedy weighs it: workers before, GPUs added, objective before and
after, and its score (objective saved per GPU)."""


def start_size(job: JobView) -> int:
    """The most an elastic job gets before it is measured: its spec's ``gpus``, when raised.

    An elastic job whose ``gpus`` is above its minimum asked to start there;
    left at the minimum (the default) it states no start, and unmeasured
    growth goes up to its maximum. Measured, the speed model decides.
    """
    if job.elastic and job.requested_gpus > job.min_gpus:
        return job.requested_gpus
    return job.max_gpus


def weigh(
    c: Candidate, w: int, step: StepOf, per_epoch: bool
) -> tuple[Entry, None] | tuple[None, Note]:
    """``c``'s step from ``w`` workers, or the note where its growth stops for a reason of
    its own: at its maximum, not yet measured past its start size, or no gain."""
    nxt = step(c, w)
    if nxt is None:
        return None, at_max(c, w, per_epoch)
    add, before, after = nxt
    if not c.measured and w + add > start_size(c.job):
        # Not measured yet: no bigger than the size it asked to start at.
        return None, note(
            UNMEASURED,
            w,
            next_workers=w + add,
            before_s=before,
            after_s=after,
            per_epoch=per_epoch,
            measured=False,
        )
    score = (before - after) / add
    if not score > 0:  # no gain, or none to speak of (NaN: an objective of inf at both sizes)
        return None, no_gain(c, w, add, before, after, per_epoch)
    return (w, add, before, after, score), None


def at_max(c: Candidate, w: int, per_epoch: bool) -> Note:
    """The note of a job at ``w`` workers with no step left: at its maximum."""
    return note(AT_MAX, w, per_epoch=per_epoch, limit=c.job.max_gpus)


def no_gain(c: Candidate, w: int, add: int, before: float, after: float, per_epoch: bool) -> Note:
    """The note of a grow from ``w`` by ``add`` that saves nothing."""
    return note(
        NO_GAIN,
        w,
        next_workers=w + add,
        before_s=before,
        after_s=after,
        per_epoch=per_epoch,
        measured=c.measured,
    )


def not_won(c: Candidate, w: int, add: int, before: float, after: float, per_epoch: bool) -> Note:
    """The note of a grow from ``w`` by ``add`` that would not win back its restart."""
    return note(
        RESTART_NOT_WON,
        w,
        next_workers=w + add,
        before_s=before,
        after_s=after,
        per_epoch=per_epoch,
        saved_s=saved_by(c, w + add),
    )


def outbid(c: Candidate, entry: Entry, per_epoch: bool, gpus: int, bar: float | None) -> Note:
    """The note of ``c``'s step ``entry``, not taken for want of GPUs: ``gpus`` were left,
    and ``bar`` was the lowest score of a step a measured job took."""
    w, add, before, after, _ = entry
    return note(
        OUTBID,
        w,
        next_workers=w + add,
        before_s=before,
        after_s=after,
        per_epoch=per_epoch,
        free=gpus,
        bar=bar,
        measured=c.measured,
    )


def scaled_entry(entry: Entry, scale: float) -> Entry:
    """A step of a chain laid out per unit of work (``growth.greedy``'s ``scaled``), for a
    job with ``scale`` of it left: its objectives times ``scale``, and its score worked
    out from those as ``chains.weigh`` works out any step's (not the chain's score
    scaled, which may differ in its last bit and so turn a near tie round)."""
    w, add, before, after, _ = entry
    before, after = scale * before, scale * after
    return w, add, before, after, (before - after) / add


class Growth(NamedTuple):
    """What ``grow`` returns: every job's size, and why each job it weighed stopped.

    ``notes``: a ``plan.Sizing`` as a plain ``Note``, for the jobs whose
    growth the allocator weighed; a job it did not is ``FIXED``
    (``plan.SizingNotes``). ``later``: more notes, written only if someone
    asks (most decisions' never are): over kept chains every walked job's
    (``walk.walk``), else those of the steps it had no GPUs for.
    """

    counts: Counts
    notes: dict[str, Note]
    later: Callable[[], dict[str, Note]] | None = None
