"""Per-user GPU quotas, around any policy: who may be offered GPUs, and what a Plan may grant.

A quota caps the GPUs a user's *running* jobs use at once (a time-sliced job
suspended in host memory uses none). It is enforced around the policy, so
every policy honours it without knowing of it:

1. ``admit`` hides from the policy the queued jobs whose owner has no room
   left for even their smallest size, and caps an elastic job's largest size
   at its owner's quota, so the policy spends free GPUs on jobs that can use
   them.
2. ``trim`` then walks the policy's Plan owner by owner, jobs already running
   first, and shrinks (elastic) or holds back what would take an owner past
   their quota. Each held-back job gets a reason a person can read.

Both are pure: the runtime applies them with the users' quotas; the
simulator can do the same with a workload's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from ringleader.policy.model.plan import WAIT, Assignment, Plan
from ringleader.policy.model.views import JobView


def _used(views: Sequence[JobView], owner: Mapping[str, str]) -> dict[str, int]:
    """GPUs each owner's running jobs use now."""
    used: dict[str, int] = {}
    for v in views:
        if v.workers and not v.suspended:
            used[owner[v.id]] = used.get(owner[v.id], 0) + v.workers
    return used


def admit(
    views: Sequence[JobView], owner: Mapping[str, str], quota: Mapping[str, int]
) -> tuple[list[JobView], dict[str, str]]:
    """The views a policy should see, and why each job left out waits.

    An owner's waiting jobs are admitted in priority and submission order
    while their smallest sizes, on top of what the owner's running jobs use,
    fit the quota (as Kueue admits workloads): so a policy never plans several
    of one owner's jobs that could not run together, leaving other users'
    jobs waiting for GPUs the trim would then leave idle.
    """
    using = _used(views, owner)
    planned = dict(using)
    hidden: dict[str, str] = {}
    waiting = sorted(
        (v for v in views if v.workers == 0 and owner[v.id] in quota),
        key=lambda v: (-v.priority, v.submitted_at),
    )
    for v in waiting:
        user = owner[v.id]
        if planned.get(user, 0) + v.min_gpus > quota[user]:
            hidden[v.id] = _over(user, using.get(user, 0), quota[user], v.min_gpus)
        else:
            planned[user] = planned.get(user, 0) + v.min_gpus
    shown = []
    for v in views:
        if v.id in hidden:
            continue
        limit = quota.get(owner[v.id])
        if limit is not None and v.elastic and v.max_gpus > limit:
            v = replace(v, max_gpus=max(limit, v.min_gpus))
        shown.append(v)
    return shown, hidden


def trim(
    plan: Plan,
    views: Sequence[JobView],
    owner: Mapping[str, str],
    quota: Mapping[str, int],
) -> tuple[Plan, dict[str, str]]:
    """``plan`` with no owner over quota, and why each job it held back waits."""
    if not quota:
        return plan, {}
    # Running jobs keep their GPUs first; then the rest by priority and age.
    order = sorted(
        (v for v in views if quota.get(owner[v.id]) is not None),
        key=lambda v: (not (v.workers and not v.suspended), -v.priority, v.submitted_at),
    )
    granted: dict[str, int] = {}
    changed: dict[str, Assignment] = {}
    reasons: dict[str, str] = {}
    for v in order:
        a = plan.of(v.id)
        if not a.running:
            continue
        user = owner[v.id]
        limit = quota[user]
        room = limit - granted.get(user, 0)
        if a.workers <= room:
            granted[user] = granted.get(user, 0) + a.workers
            continue
        keep = room if v.elastic and room >= v.min_gpus else 0
        if keep:
            changed[v.id] = Assignment(a.devices[:keep], keep)
            granted[user] = limit
            reasons[v.id] = f"user {user} is at their quota of {limit} GPUs: runs on {keep}"
        else:
            changed[v.id] = WAIT
            reasons[v.id] = _over(user, granted.get(user, 0), limit, v.min_gpus)
    if not changed:
        return plan, reasons
    return replace(plan, assignments={**plan.assignments, **changed}), reasons


def _over(user: str, used: int, limit: int, needs: int) -> str:
    return (
        f"over quota: user {user}'s running jobs use {used} of their {limit} GPUs "
        f"and this job needs {needs}"
    )
