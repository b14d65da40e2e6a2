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


class Cadence:
    """When a run decides: which events call for a decision, and where its rounds fall.

    By default a round falls on each multiple of ``round_s`` (Pollux's simulator
    decides so), and a ticking run decides at the tick after any event. With
    ``after_decisions`` it counts as the runtime's controller does: a round is
    ``round_s`` after the last decision, and only what the controller decides on
    calls for one (``decides_on``). The fidelity replay counts so. ``idle``: a run
    that decides at every event and that no driver steers may skip a decision that
    would give its plan back (``decide_now``).
    """

    __slots__ = ("after_decisions", "idle", "next_at", "round_s")

    def __init__(self, round_s: float | None, after_decisions: bool, idle: bool) -> None:
        self.round_s = round_s
        self.after_decisions = after_decisions and round_s is not None
        self.idle = idle
        self.next_at = math.inf
        """Counting after decisions: when the next round is due."""

    def decide_now(
        self, plan: Plan | None, now: float, due: float, still: bool, quiet: bool
    ) -> bool:
        """Whether to decide at ``now``: one is ``due``, and neither did only the clock
        move while the plan would stand (``still``, where ``idle``), nor was the event an
        outage that touched no job (``quiet``)."""
        if now < due or (quiet and unmarked(plan, now, self.round_s)):
            return False
        return not (self.idle and still and stands(plan, now))

    def decided(self, now: float) -> None:
        if self.after_decisions and self.round_s is not None:
            self.next_at = now + self.round_s

    def decides_on(self, plan: Plan | None, now: float, arrival: float, ended: bool) -> bool:
        """Whether what happened at ``now`` calls for a decision at the next tick: any
        event by default; counting after decisions, only an arrival, a job's end or an
        outage (``ended``), a round or the wake-up ``plan`` asked for, and not a running
        job's new speed (an epoch's end, a gradient report), which the controller only
        records."""
        if not self.after_decisions or ended or arrival <= now or self.next_at <= now:
            return True
        return plan is not None and plan.wake_at is not None and plan.wake_at <= now

    def ahead(self, now: float) -> tuple[float, float | None]:
        """For ``next_event``: a round it must stop at (inf: none), and the ``round_s``
        whose multiples it must stop at (None: none)."""
        if not self.after_decisions:
            return math.inf, self.round_s
        return (self.next_at if self.next_at > now else math.inf), None
