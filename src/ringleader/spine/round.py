"""One decision round, the same in both bodies: admit, decide, trim, explain.

A body that decides hands its views here and gets back the Plan to carry out,
the jobs its owners' quotas held back, and (when asked) why each job waits or
has the GPUs it has:

1. ``quota.admit`` hides the waiting jobs whose owner has no room left;
2. ``deciding.decide`` asks the policy for a Plan over the others;
3. ``quota.trim`` cuts that Plan back to the quotas;
4. ``reasons.explain`` reads each job's reason from the trimmed Plan;
5. ``batching.rebatched`` names the jobs to relaunch where they run, for a
   better batch (only among jobs that take their batch at a launch).

Admitting and trimming are skipped where no user has a quota, and explaining
where nobody asked: the simulator, which decides thousands of times a run,
then pays for the policy alone, and the Plan is the policy's own.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from ringleader.policy.model.plan import Decider, Plan
from ringleader.policy.model.views import ClusterView, JobView
from ringleader.spine import quota
from ringleader.spine.batching import rebatched
from ringleader.spine.deciding import decide
from ringleader.spine.reasons import Reason
from ringleader.spine.reasons import explain as explain_plan

NO_QUOTAS: Mapping[str, int] = {}


@dataclass(frozen=True, slots=True)
class Round:
    """What one round decided.

    ``held_back``: each job the quotas kept from running (or cut to a smaller
    size), with the sentence that says so. ``reasons``: each job's reason,
    empty when the round was not asked to explain.
    """

    plan: Plan
    held_back: dict[str, str] = field(default_factory=dict)
    reasons: dict[str, Reason] = field(default_factory=dict)
    rebatch: frozenset[str] = frozenset()
    """Jobs the plan keeps where they run, to relaunch there for a better batch."""


def decide_round(
    policy: Decider,
    views: Sequence[JobView],
    cluster: ClusterView,
    now: float,
    *,
    owner: Mapping[str, str],
    quotas: Mapping[str, int] = NO_QUOTAS,
    explain: bool = False,
    alone: bool = False,
    batched: Collection[str] = (),
) -> Round:
    """Admit ``views`` within ``quotas``, decide, trim the Plan, and explain it if asked.

    ``owner``: each job's user, by job id; read only where there are quotas or
    reasons to give. ``alone``: as ``deciding.decide``'s (the simulator). Whatever the
    policy raises is raised as it is: the body
    decides what a failed decision means (the runtime keeps its last Plan).
    ``batched``: the jobs that take their batch at a launch (``spine.batching``).
    """
    admitted: Sequence[JobView] = views
    hidden: dict[str, str] = {}
    if quotas:
        admitted, hidden = quota.admit(views, owner, quotas)
    plan = decide(policy, admitted, cluster, now, alone=alone)
    held_back = hidden
    if quotas:
        plan, trimmed = quota.trim(plan, views, owner, quotas)
        held_back = hidden | trimmed
    rebatch = rebatched(plan, admitted, batched, cluster.widest_node)
    if not explain:
        return Round(plan, held_back, rebatch=rebatch)
    why = explain_plan(plan, views, owner, cluster.capacity, held_back, now=now, cluster=cluster)
    return Round(plan, held_back, why, rebatch)
