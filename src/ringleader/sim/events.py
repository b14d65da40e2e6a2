"""When the simulator's next event is, and whether an event needs a decision.

Between events nothing changes that a policy reads, so the engine jumps from
one to the next: an arrival, an outage starting or ending, a completion, the
wake-up a plan asked for, a round mark, a snapshot, and (ticking) the next
decision.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ringleader.policy.model.plan import Plan
from ringleader.sim.jobs import DONE, JobState
from ringleader.sim.ticks import Finishes


def next_event(
    plan: Plan | None,
    running: Sequence[JobState],
    arrival: float,
    now: float,
    finishes: Finishes | None,
    marks: Sequence[float],
    *,
    round_s: float | None,
    tick_s: float | None,
    due: float,
    until: float,
) -> float:
    """When the next event is after ``now``: ``arrival`` (the next job's, or an
    outage's change), a completion, a wake-up, a round mark or a snapshot (``marks``),
    and no later than ``until`` or (ticking: ``tick_s``) the next decision, ``due``:
    inf where none is.

    ``finishes``: ticking, when running jobs end (else each is asked)."""
    later = arrival
    # Where nothing runs, nothing progresses, so only an arrival can change the plan.
    if running:
        if plan is not None and plan.wake_at is not None and plan.wake_at > now:
            later = min(later, plan.wake_at)
        if round_s is not None:
            later = min(later, (math.floor(now / round_s) + 1) * round_s)
        if finishes is not None:
            later = min(later, finishes.first)
        else:
            for state in running:
                later = min(later, state.finish_time(now))
    later = min(later, until)
    if tick_s is not None:
        later = min(later, due)
    if marks and now < marks[0] < later and not math.isinf(later):
        later = marks[0]
    return later


def stands(plan: Plan | None, now: float) -> bool:
    """Whether ``plan`` is settled and not due for the wake-up it asked for by ``now``."""
    return plan is not None and plan.settled and (plan.wake_at is None or plan.wake_at > now)


def unmarked(plan: Plan | None, now: float, round_s: float | None) -> bool:
    """Whether ``now`` is neither a round mark nor the wake-up ``plan`` asked for: an
    outage that touched no job need not be decided on then."""
    if plan is not None and plan.wake_at is not None and plan.wake_at <= now:
        return False
    return round_s is None or now % round_s != 0


def ended(
    running: list[JobState], finishes: Finishes | None, now: float, since: float
) -> tuple[list[JobState], float]:
    """The running jobs that ended by ``now``, and when every running job has advanced
    to (ticking, ``now`` where the ended ones caught the rest up)."""
    if finishes is None:
        return [s for s in running if s.remaining <= DONE], since
    finished, caught_up = finishes.ended(now, running)
    return finished, now if caught_up else since
