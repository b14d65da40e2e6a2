"""How long each simulated job waited, per reason code (``spine.reasons``), and the
GPUs each ran on over time: what ``Simulator(explain=True)`` records per job.

Each decision gives every job the plan does not run a reason; the job waits
for that reason until the next decision (a skipped round leaves the plan, and
so the reasons, standing). A job is counted from the first decision that saw
it: under ``tick_s``, the time between its arrival and the next tick is no
reason's.
"""

from __future__ import annotations

from collections.abc import Mapping

from ringleader.policy.model.plan import Plan
from ringleader.spine.reasons import Reason


class Waits:
    """Seconds waited per job and reason code, summed over the time between decisions."""

    __slots__ = ("_since", "_waiting", "totals")

    def __init__(self, now: float) -> None:
        self.totals: dict[str, dict[str, float]] = {}
        """By job id, seconds waited for each reason code (jobs that never waited: absent)."""
        self._waiting: dict[str, str] = {}
        self._since = now

    def decided(self, now: float, plan: Plan, why: Mapping[str, Reason]) -> None:
        """A decision at ``now``: the last one's waits end here, this one's begin."""
        self.close(now)
        given = plan.assignments
        self._waiting = {
            job: reason.code
            for job, reason in why.items()
            if (a := given.get(job)) is None or not a.running
        }

    def close(self, now: float) -> None:
        """Count the waits under the last decision up to ``now``."""
        span = now - self._since
        self._since = now
        if span <= 0:
            return
        for job, code in self._waiting.items():
            mine = self.totals.setdefault(job, {})
            mine[code] = mine.get(code, 0.0) + span


class GpuTimeline:
    """Each job's GPUs over the run: ``(time, GPUs running its workers)`` at every
    decision that changed them, 0 while it waits or is suspended (what ``simulate
    --json`` writes per job). A plan is carried out whole at its decision, so the
    plan's counts are the job's."""

    __slots__ = ("changes",)

    def __init__(self) -> None:
        self.changes: dict[str, list[tuple[float, int]]] = {}
        """By job id; a job never placed is absent."""

    def decided(self, now: float, plan: Plan) -> None:
        changes = self.changes
        for job, a in plan.assignments.items():
            gpus = a.workers if a.running else 0
            seen = changes.get(job)
            if seen is None:
                if gpus:
                    changes[job] = [(now, gpus)]
            elif seen[-1][1] != gpus:
                if seen[-1][0] == now:
                    seen[-1] = (now, gpus)
                else:
                    seen.append((now, gpus))

    def finished(self, job: str, at: float) -> None:
        """The job ended at ``at``: its GPUs go back."""
        seen = self.changes.get(job)
        if seen and seen[-1][1]:
            seen.append((at, 0))
