"""What a simulated run gives back: each job's record and progress, usage, shares."""

from __future__ import annotations

from dataclasses import dataclass, field

from ringleader.fairness import ShareSample
from ringleader.metrics import JobRecord, Summary, UsagePoint
from ringleader.policy.model.plan import Plan
from ringleader.sim.jobs import JobState


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
