"""Walking a decision's views beside the last decision's.

A body hands most views over again from one event to the next, as the same
objects in the same order, so a stage that keeps what it worked out last time
(``keeping.LastKept``, ``regroup.LastGroups``) finds what changed by walking
the new list beside the old one, comparing objects, and looks a little ahead
where the two part: the views it passes over there are of jobs that left.
"""

from __future__ import annotations

from ringleader.policy.model.views import JobView

SKIPS = 8
"""Views of the last walk one walk may pass over at once (their jobs left, or have new
views) before it takes a view for a new job, or stops walking beside the last one."""


def ahead(before: list[JobView], at: int, job: JobView) -> int:
    """Where ``job``'s view, or another view of its job, is among the next ``SKIPS`` of
    ``before`` from ``at``; -1 if not there."""
    k = at
    while k < len(before) and k < at + SKIPS:
        seen = before[k]
        if seen is job or seen.id == job.id:
            return k
        k += 1
    return -1
