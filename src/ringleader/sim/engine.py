"""The discrete-event simulator: the policy core's plans, played on a virtual clock.

At every event — an arrival, a completion, a round tick, or the time the policy
asked to be woken — the engine builds a snapshot, asks the policy for a Plan,
and carries it out, charging ``restart_delay_s`` of lost time to every job
whose workers or GPUs changed (a checkpoint-stop-restart, SPEC A5). Between
events every running job advances at its true speed, so the next completion
is known exactly and nothing is stepped through that does not change.

The engine makes no scheduling decision of its own: which jobs run, where and
at what size all come from the Plan.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ringleader.metrics import JobRecord, Summary, UsagePoint, summarize
from ringleader.perf.epochs import EpochsToConverge
from ringleader.policy.plan import Plan
from ringleader.policy.stack import Policy
from ringleader.policy.views import ClusterView, Device, JobView, Observation
from ringleader.sim.errors import SimulationStalled
from ringleader.sim.profiles import TrueProfile

# Checkpoint → stop → restart at a new world size, measured on this project's
# 2-core CPU machine with gloo (1 → 2 ranks, ~3.8 s, 2 s of it Python and
# torch start-up). The seed reports "a few seconds" on its GPUs.
DEFAULT_RESTART_DELAY_S = 3.8
DEFAULT_ROUND_S = 600.0
_DONE = 1e-9


@dataclass(frozen=True, slots=True)
class SimJob:
    """A job as submitted to the simulator, with its true behaviour."""

    id: str
    submitted_at: float
    profile: TrueProfile
    max_gpus: int = 8
    min_gpus: int = 1
    requested_gpus: int = 1
    elastic: bool = True
    work_scale: float = 1.0
    """This job needs ``work_scale`` times the epochs of its profile."""


@dataclass(slots=True)
class _State:
    job: SimJob
    remaining: float = 1.0
    devices: tuple[Device, ...] = ()
    workers: int = 0
    ready_at: float = 0.0
    started_at: float | None = None
    finished_at: float | None = None
    resizes: int = 0
    observations: dict[int, Observation] = field(default_factory=dict)
    attained_gpu_s: float = 0.0
    epochs: EpochsToConverge = field(init=False)

    def __post_init__(self) -> None:
        self.epochs = self.job.profile.epochs.scaled(self.job.work_scale)

    def view(self) -> JobView:
        job = self.job
        profile = job.profile
        return JobView(
            id=job.id,
            submitted_at=job.submitted_at,
            shape=profile.shape,
            epochs=self.epochs,
            remaining_fraction=self.remaining,
            min_gpus=job.min_gpus,
            max_gpus=job.max_gpus,
            requested_gpus=job.requested_gpus,
            elastic=job.elastic,
            devices=self.devices,
            workers=self.workers,
            speed=profile.speed_model,
            # Shared, not copied: the policy reads it only while deciding.
            observations=self.observations,
            attained_gpu_s=self.attained_gpu_s,
        )

    def rate(self) -> float:
        """Fraction of the job completed per second of productive time."""
        return 1.0 / (self.job.work_scale * self.job.profile.seconds_alone(self.workers))

    def finish_time(self, now: float) -> float:
        if self.workers == 0:
            return math.inf
        return max(now, self.ready_at) + self.remaining / self.rate()

    def advance(self, start: float, end: float) -> None:
        if self.workers == 0:
            return
        self.attained_gpu_s += self.workers * (end - start)
        productive = end - max(start, self.ready_at)
        if productive <= 0:
            return
        self.remaining = max(0.0, self.remaining - productive * self.rate())
        w = self.workers
        seen = self.observations.get(w)
        profile = self.job.profile
        self.observations[w] = Observation(
            profile.step_time(w),
            productive + (seen.seconds if seen is not None else 0.0),
            profile.shape.batch_per_worker,
        )


@dataclass(frozen=True, slots=True)
class SimResult:
    policy: str
    records: tuple[JobRecord, ...]
    usage: tuple[UsagePoint, ...]
    summary: Summary
    decisions: int
    wall_s: float


class Simulator:
    """Plays ``jobs`` on ``cluster`` under ``policy``; see the module docstring."""

    def __init__(
        self,
        policy: Policy,
        cluster: ClusterView,
        jobs: Sequence[SimJob],
        *,
        restart_delay_s: float = DEFAULT_RESTART_DELAY_S,
        round_s: float | None = DEFAULT_ROUND_S,
        on_finish: Callable[[int, int], None] | None = None,
    ) -> None:
        if restart_delay_s < 0:
            raise ValueError(f"restart_delay_s must be >= 0, got {restart_delay_s}")
        if round_s is not None and round_s <= 0:
            raise ValueError(f"round_s must be positive or None, got {round_s}")
        ids = [j.id for j in jobs]
        if len(set(ids)) != len(ids):
            raise ValueError("job ids must be unique")
        self.policy = policy
        self.cluster = cluster
        self.jobs = sorted(jobs, key=lambda j: (j.submitted_at, j.id))
        self.restart_delay_s = restart_delay_s
        self.round_s = round_s
        self.on_finish = on_finish
        """Called with (jobs finished, jobs in all) as jobs complete: for progress bars."""

    def run(self) -> SimResult:
        started = time.perf_counter()
        pending = self.jobs
        nxt = 0
        active: dict[str, _State] = {}
        done: list[_State] = []
        usage: list[UsagePoint] = []
        decisions = 0
        now = pending[0].submitted_at if pending else 0.0
        while nxt < len(pending) or active:
            while nxt < len(pending) and pending[nxt].submitted_at <= now:
                job = pending[nxt]
                active[job.id] = _State(job)
                nxt += 1
            plan = self.policy.decide([s.view() for s in active.values()], self.cluster, now)
            decisions += 1
            self._apply(plan, active, now)
            point = UsagePoint(now, plan.busy_gpus, plan.held_gpus, len(active))
            if usage and usage[-1].time == now:
                usage[-1] = point
            elif not usage or (usage[-1].busy, usage[-1].held, usage[-1].jobs) != (
                point.busy,
                point.held,
                point.jobs,
            ):
                usage.append(point)
            later = self._next_event(plan, active, pending, nxt, now)
            if math.isinf(later):
                waiting = ", ".join(sorted(active)[:5])
                raise SimulationStalled(
                    f"at t={now:.0f}s jobs {waiting} wait but nothing runs or arrives: "
                    f"the policy {self.policy.name!r} cannot fit them on "
                    f"{self.cluster.capacity} GPUs (check each job's GPU request)"
                )
            for state in active.values():
                state.advance(now, later)
            now = later
            for job_id in [i for i, s in active.items() if s.workers and s.remaining <= _DONE]:
                state = active.pop(job_id)
                state.finished_at = now
                done.append(state)
                if self.on_finish is not None:
                    self.on_finish(len(done), len(pending))
        usage.append(UsagePoint(now, 0, 0, 0))
        records = tuple(
            JobRecord(s.job.id, s.job.submitted_at, s.started_at, s.finished_at, s.resizes)
            for s in sorted(done, key=lambda s: (s.job.submitted_at, s.job.id))
        )
        return SimResult(
            policy=self.policy.name,
            records=records,
            usage=tuple(usage),
            summary=summarize(records, usage, self.cluster.capacity),
            decisions=decisions,
            wall_s=time.perf_counter() - started,
        )

    def _apply(self, plan: Plan, active: dict[str, _State], now: float) -> None:
        for job_id, state in active.items():
            target = plan.of(job_id)
            if target.workers and target.active_devices != state.devices[: state.workers]:
                # New workers or new GPUs: checkpoint, stop, restart (or first launch).
                state.ready_at = now + self.restart_delay_s
                if state.started_at is None:
                    state.started_at = now
                else:
                    state.resizes += 1
            state.devices = target.devices
            state.workers = target.workers

    def _next_event(
        self,
        plan: Plan,
        active: dict[str, _State],
        pending: Sequence[SimJob],
        nxt: int,
        now: float,
    ) -> float:
        later = pending[nxt].submitted_at if nxt < len(pending) else math.inf
        running = [s for s in active.values() if s.workers]
        if not running:
            # Nothing progresses, so only an arrival can change the plan.
            return later
        if plan.wake_at is not None and plan.wake_at > now:
            later = min(later, plan.wake_at)
        if self.round_s is not None:
            later = min(later, (math.floor(now / self.round_s) + 1) * self.round_s)
        for state in running:
            later = min(later, state.finish_time(now))
        return later
