"""Submission order: the order every stage starts from, total and repeatable."""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter

from ringleader.policy.model.views import JobView

_ARRIVAL = attrgetter("submitted_at", "id")


def fifo(jobs: Sequence[JobView]) -> list[JobView]:
    """Submission order, ties broken by id so the order is total and repeatable.

    Both bodies hand jobs over in that order already, as a rule: then a look at
    each neighbour, field by field, finds it so without a key tuple per job. The
    jobs are walked, not indexed (docs/scale.md, "The compiled hot path").
    """
    before: JobView | None = None
    for job in jobs:
        if before is not None and arrives_before(job, before):
            return sorted(jobs, key=_ARRIVAL)
        before = job
    return list(jobs)


def arrives_before(a: JobView, b: JobView) -> bool:
    """Whether ``a`` comes before ``b`` in submission order (ties by id), as ``fifo`` sorts,
    without building a key for either."""
    if a.submitted_at != b.submitted_at:
        return a.submitted_at < b.submitted_at
    return a.id < b.id
