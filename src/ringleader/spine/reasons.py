"""Why each job waits, or runs on fewer GPUs than it could: read from a Plan, for people.

Every policy's Plan says where jobs run, not why the others do not. What the
Plan and the snapshot do say is enough for the first question a user asks:
are there no free GPUs (and who holds them), is the job time-sliced out,
is it held back by its owner's quota, or are there GPUs free that the
policy's order gives to other jobs first. Each reason has a stable code for
programs and a sentence for people. Pure: both bodies can use it.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ringleader.policy.plan import Plan
from ringleader.policy.views import JobView

QUOTA = "over_quota"
NO_FREE_GPUS = "no_free_gpus"
TIME_SLICE = "time_sliced_out"
IN_ORDER = "behind_in_order"
SMALLER = "runs_smaller"
DISK_FULL = "disk_full"
"""Set by a body, not by ``explain``: an action it could not carry out for want of room."""


@dataclass(frozen=True, slots=True)
class Reason:
    code: str
    text: str


def explain(
    plan: Plan,
    views: Sequence[JobView],
    owner: Mapping[str, str],
    capacity: int,
    quota_reasons: Mapping[str, str],
) -> dict[str, Reason]:
    """A reason for each job the plan does not run at its largest size."""
    running = [v for v in views if plan.of(v.id).running]
    # Held, not only running: a time-sliced job keeps its place on its GPUs.
    free = max(capacity - plan.held_gpus, 0)
    holders = sorted(running, key=lambda v: -plan.of(v.id).workers)
    # Submission times of the jobs not running, sorted: how many wait ahead of a
    # job is one binary search, not a scan (this runs at every decision).
    waiting = sorted(v.submitted_at for v in views if not plan.of(v.id).running)
    out: dict[str, Reason] = {}
    for v in views:
        a = plan.of(v.id)
        if v.id in quota_reasons:
            out[v.id] = Reason(QUOTA, quota_reasons[v.id])
        elif a.suspended:
            out[v.id] = Reason(
                TIME_SLICE,
                f"time-sliced out: keeps its place on {len(a.devices)} GPU(s) and runs again "
                "at its next turn",
            )
        elif not a.running and v.min_gpus > free:
            out[v.id] = Reason(
                NO_FREE_GPUS,
                f"needs {v.min_gpus} GPU(s), {free} free; held by "
                + _who(holders, plan, owner)
                + f" ({capacity} in all)",
            )
        elif not a.running:
            ahead = bisect.bisect_left(waiting, v.submitted_at)
            out[v.id] = Reason(
                IN_ORDER,
                f"{free} GPU(s) free but kept for jobs the policy ranks first"
                + (f"; {ahead} job(s) submitted earlier also wait" if ahead else ""),
            )
        elif v.elastic and a.workers < v.max_gpus:
            out[v.id] = Reason(
                SMALLER,
                f"runs on {a.workers} of up to {v.max_gpus} GPUs: "
                + (
                    "no more are free"
                    if free == 0
                    else "the policy judged more would not pay (speed gained against "
                    "the restart a resize costs)"
                ),
            )
    return out


def _who(holders: Sequence[JobView], plan: Plan, owner: Mapping[str, str]) -> str:
    named = [f"{v.id} ({owner.get(v.id, '?')}, {plan.of(v.id).workers})" for v in holders[:3]]
    more = len(holders) - len(named)
    return (", ".join(named) or "nobody") + (f" and {more} more" if more > 0 else "")
