"""What a simulated run gives back: each job's record and progress, usage, shares.

``RunLog`` is what the engine's event loop writes as it goes (``sim.engine``);
``RunLog.result`` turns it, once the clock stops, into the ``SimResult``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ringleader.fairness import ShareSample
from ringleader.metrics import JobRecord, Summary, UsagePoint, summarize
from ringleader.policy.model.plan import Plan
from ringleader.sim.jobs import JobState
from ringleader.sim.waits import GpuTimeline, Waits
from ringleader.spine.actions import EventCounts
from ringleader.spine.reasons import Reason


@dataclass(frozen=True, slots=True)
class JobProgress:
    """How far one job got, finished or not (for runs cut off at a horizon)."""

    id: str
    submitted_at: float
    done_fraction: float
    first_at: float | None
    finished_at: float | None


@dataclass(frozen=True, slots=True)
class SimResult:
    policy: str
    records: tuple[JobRecord, ...]
    usage: tuple[UsagePoint, ...]
    summary: Summary
    decisions: int
    wall_s: float
    progress: tuple[JobProgress, ...] = ()
    ended_at: float = 0.0
    snapshots: dict[float, dict[str, float]] = field(default_factory=dict)
    """Done fraction of every job at each requested snapshot time."""
    counts: dict[str, int] = field(default_factory=dict)
    """The spine's counted events over the whole run (starts, resizes, migrations…)."""
    shares: tuple[ShareSample, ...] = ()
    """Per-user GPUs and demand over time, where jobs name more than one user."""
    waits: dict[str, dict[str, float]] = field(default_factory=dict)
    """Per job, seconds waited for each reason code (``Simulator(explain=True)``; else empty)."""
    gpus: dict[str, list[tuple[float, int]]] = field(default_factory=dict)
    """Per job, (time, GPUs running its workers) at each change (``explain=True``; else empty)."""


def sample_shares(
    samples: list[ShareSample], now: float, plan: Plan, active: dict[str, JobState], capacity: int
) -> None:
    """Append each user's running GPUs and demand from ``now`` (replacing a sample at ``now``)."""
    gpus: dict[str, int] = {}
    demand: dict[str, int] = {}
    for job_id, state in active.items():
        job = state.job
        want = job.max_gpus if job.elastic else job.requested_gpus
        demand[job.user] = demand.get(job.user, 0) + min(want, capacity)
        a = plan.of(job_id)
        if a.running:
            gpus[job.user] = gpus.get(job.user, 0) + a.workers
    sample = ShareSample(now, gpus, demand)
    if samples and samples[-1].time == now:
        samples[-1] = sample
    elif not samples or (samples[-1].gpus, samples[-1].demand) != (gpus, demand):
        samples.append(sample)


class RunLog:
    """A run's record while it plays: what its result is made of, kept apart from the
    state the event loop steps (who runs, when each finishes)."""

    __slots__ = (
        "by_user",
        "decisions",
        "done",
        "gpus",
        "marks",
        "shares",
        "snapshots",
        "usage",
        "waits",
    )

    def __init__(self, now: float, snapshot_at: Sequence[float], by_user: bool) -> None:
        self.done: list[JobState] = []
        """The jobs that finished, in the order they did."""
        self.usage: list[UsagePoint] = []
        self.decisions = 0
        self.marks = list(snapshot_at)
        """The snapshot times still to come, earliest first."""
        self.snapshots: dict[float, dict[str, float]] = {}
        self.shares: list[ShareSample] = []
        self.by_user = by_user
        """Whether jobs name more than one user: then each decision's shares are sampled."""
        self.waits = Waits(now)
        self.gpus = GpuTimeline()

    def explained(self, now: float, plan: Plan, why: Mapping[str, Reason]) -> None:
        """A decision the run explains (``Simulator(explain=True)``): each job's reason to
        wait, and its GPUs."""
        self.waits.decided(now, plan, why)
        self.gpus.decided(now, plan)

    def decided(self, now: float, plan: Plan, active: dict[str, JobState], capacity: int) -> None:
        """Count a decision at ``now``, and sample each user's share of it."""
        self.decisions += 1
        if self.by_user:
            sample_shares(self.shares, now, plan, active, capacity)

    def note_usage(self, point: UsagePoint) -> None:
        """Record the GPUs in use after an event (replacing a point at the same time)."""
        usage = self.usage
        if usage and usage[-1].time == point.time:
            usage[-1] = point
        elif not usage or (usage[-1].busy, usage[-1].held, usage[-1].jobs) != (
            point.busy,
            point.held,
            point.jobs,
        ):
            usage.append(point)

    def snapshot(self, now: float, active: dict[str, JobState]) -> None:
        """Every job's done fraction, at each snapshot time reached by ``now``."""
        marks = self.marks
        while marks and marks[0] <= now:
            self.snapshots[marks.pop(0)] = {
                **{s.job.id: 1.0 for s in self.done},
                **{i: 1.0 - s.remaining for i, s in active.items()},
            }

    def result(
        self, policy: str, capacity: int, now: float, active: dict[str, JobState], started: float
    ) -> SimResult:
        """The run's result, its clock stopped at ``now`` (``started``: its
        ``time.perf_counter()`` at the start, for the wall time)."""
        self.waits.close(now)
        usage, done = self.usage, self.done
        for s in done:
            if s.finished_at is not None:
                self.gpus.finished(s.job.id, s.finished_at)
        usage.append(UsagePoint(now, 0, 0, 0))
        progress = tuple(
            JobProgress(s.job.id, s.job.submitted_at, 1.0 - s.remaining, s.first_at, s.finished_at)
            for s in sorted([*done, *active.values()], key=lambda s: (s.job.submitted_at, s.job.id))
        )
        records = tuple(
            JobRecord(s.job.id, s.job.submitted_at, s.started_at, s.finished_at, s.counts.resizes)
            for s in sorted(done, key=lambda s: (s.job.submitted_at, s.job.id))
        )
        total = EventCounts()
        for s in [*done, *active.values()]:
            for kind, n in s.counts.events.items():
                total.add(kind, n)
        return SimResult(
            counts=total.as_dict(),
            policy=policy,
            records=records,
            usage=tuple(usage),
            summary=summarize(records, usage, capacity),
            decisions=self.decisions,
            wall_s=time.perf_counter() - started,
            progress=progress,
            ended_at=now,
            snapshots=self.snapshots,
            shares=tuple(self.shares),
            waits=self.waits.totals,
            gpus=self.gpus.changes,
        )
