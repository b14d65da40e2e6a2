"""A simulated job: what was submitted (``SimJob``) and how far it got (``JobState``).

``JobState`` is the engine's record of one job between events: what it holds,
how much work is left, what it reported, and what sharing does to its speed.
It turns itself into the policy's view through the spine (``job_view``), the
same way the runtime's jobs do, and advances at its true speed between events.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from ringleader.perf.epochs import EpochsToConverge
from ringleader.perf.gradient import GradientReport
from ringleader.policy.model.needs import Needs
from ringleader.policy.model.plan import WAIT, Assignment
from ringleader.policy.model.views import Device, JobView, Observation
from ringleader.sim.profiles import TrueProfile
from ringleader.sim.submitted import SimJob
from ringleader.sim.typed import table_speed
from ringleader.spine.actions import EventCounts, Held
from ringleader.spine.kin import NO_KIN, KinBook
from ringleader.spine.observe import fold
from ringleader.spine.views import (
    UNREPORTED,
    Known,
    Submitted,
    job_view,
    placement_view,
    progress_view,
)

FIRST_MINIBATCHES = 100
"""A job's time to first progress is when it has run this many minibatches (``first_at``)."""
DONE = 1e-9
"""Remaining work below which a job has finished."""


@dataclass(slots=True)
class JobState:
    job: SimJob
    remaining: float = 1.0
    devices: tuple[Device, ...] = ()
    workers: int = 0
    ready_at: float = 0.0
    started_at: float | None = None
    finished_at: float | None = None
    counts: EventCounts = field(default_factory=EventCounts)
    last: tuple[Device, ...] | None = None
    """Devices of the job's latest launch."""
    observations: dict[int, Observation] = field(default_factory=dict)
    attained_gpu_s: float = 0.0
    attained_effective_s: float = 0.0
    """``attained_gpu_s`` weighted by the type held over the job's fastest type."""
    suspended: bool = False
    state_since: float = 0.0
    pending_restart: bool = False
    """No process of the job exists: it (re)starts, paying the restart, when it next runs."""
    packed: dict[str, Observation] = field(default_factory=dict)
    partners: tuple[str, ...] = ()
    factor: float = 1.0
    speed: float = 0.0
    """``rate()`` as of the last placement: it holds until who runs where changes."""
    step: float = math.inf
    """``step_time()`` as of the last placement, in the profile's terms (the type's
    speed is known apart, ``type_speed``): what the job reports while running."""
    batch: float = 0.0
    """Each worker's batch as of the last placement."""
    paced_for: tuple[int, float, float] = (0, 0.0, 0.0)
    """The workers, ``factor`` and ``type_factor`` that ``speed``, ``step`` and ``batch``
    were worked out for: sharing is worked out again for every running job whenever
    one job moves, and most of them come out as they were."""
    type_factor: float = 1.0
    """The part of ``factor`` that is the speed of the job's slowest GPU type."""
    held_types: tuple[str, ...] = ()
    """The GPU types the job runs on, where it has a table per type (``type_profiles``)."""
    phase: int = 0
    """The profile's stretch of training that ``speed`` was worked out for (``phased``
    profiles: the epoch, whose gradient statistics set the batch the job takes)."""
    phased: bool = field(init=False)
    """The profile's speed moves on as the job trains (``TrueProfile.phased``)."""
    truth: TrueProfile = field(init=False)
    """The job's profile as its latest launch runs it: a job that takes the batch it
    is handed at each launch (``SimJob.batch``) runs that batch (``sim.playing``)."""
    first_at: float | None = None
    """When the job finished its first ``FIRST_MINIBATCHES`` minibatches."""
    priority: int = 0
    epochs: EpochsToConverge = field(init=False)
    submitted: Submitted = field(init=False)
    seen: JobView | None = None
    """The last view built; kept until its priority changes, moved on in place where the
    job is placed (``moved``) or progresses (``progressed``)."""
    progressed: bool = False
    """The job ran since ``seen`` was last handed out: its progress there is out of date."""
    target: Assignment = WAIT
    """The assignment last carried out (``devices``, ``workers`` and ``suspended`` copy it)."""
    holding: Held = field(default_factory=Held)
    """What the job holds since the assignment was carried out (see ``held``)."""
    kept: float = 1.0
    """The share of its running time that is progress, not checkpoint writes (1 where
    checkpoints cost nothing: a run without ``sim.failures``)."""

    def __post_init__(self) -> None:
        job = self.job
        self.epochs = job.profile.epochs.scaled(job.work_scale)
        self.priority = job.priority
        self.phased = job.profile.phased
        self.truth = job.profile
        self.submitted = Submitted(
            job.id,
            job.submitted_at,
            job.min_gpus,
            job.max_gpus,
            job.requested_gpus,
            job.elastic,
            job.user,
            job.gpu_types,
        )

    def held(self) -> Held:
        """What the job holds, for the spine: its devices while a process of it exists."""
        alive = self.workers > 0 and not self.pending_restart
        return Held(self.devices[: self.workers] if alive else (), self.suspended, self.last)

    def carry_out(self, target: Assignment, alive: bool) -> None:
        self.target = target
        self.devices, self.workers, self.suspended = (
            target.devices,
            target.workers,
            target.suspended,
        )
        self.pending_restart = not alive
        self.holding = self.held()

    def view(
        self, capacity: int, needs: Needs, restart_s: float, book: KinBook | None = None
    ) -> JobView:
        """The job as the policy sees it, and its kin's step times from ``book``."""
        kin, seen = NO_KIN, self.seen
        if book is not None and self.phased and self.observations:
            kin = book.joined(self.truth.shape, self.observations)
        if seen is None or seen.kin is not kin:
            seen = self.seen = self._view(capacity, needs, restart_s, kin)
        elif self.progressed:
            progress_view(seen, self.remaining, self.attained_gpu_s, self._effective())
        self.progressed = False
        return seen

    def moved(self) -> None:
        """A plan was carried out for the job: its kept view shows where it is now."""
        if self.seen is not None:
            placement_view(self.seen, self.holding, self.target, self.state_since)

    def _effective(self) -> float | None:
        """Attained service in the job's best GPUs' terms, where its speed differs by type."""
        return self.attained_effective_s if self.job.type_speed else None

    def _gradient(self) -> GradientReport | None:
        """What the job reports of its gradient: measured where it runs, or last ran."""
        devices = self.devices[: self.workers] if self.workers else (self.last or ())
        if not devices or not self.observations:
            return None
        return self.truth.gradient_on(per_node(devices), 1.0 - self.remaining)

    def _view(
        self, capacity: int, needs: Needs, restart_s: float, kin: Mapping[int, Observation]
    ) -> JobView:
        job = self.job
        known = Known(
            shape=self.truth.shape if job.shape_told or self.observations else UNREPORTED,
            epochs=self.epochs,
            remaining_fraction=self.remaining,
            # Shared, not copied: the policy reads them only while deciding.
            observations=self.observations,
            packed=self.packed,
            attained_gpu_s=self.attained_gpu_s,
            state_since=self.state_since,
            priority=self.priority,
            memory_gib=job.memory_gib,
            restart_s=restart_s if job.restart_s is None else job.restart_s,
            type_speed=job.type_speed,
            attained_effective_s=self._effective(),
            gradient=self._gradient() if self.phased else None,
            kin=kin,
        )
        placed = self.target
        truth = job.profile.speed_model if needs.true_model else None
        typed = job.type_profiles
        return job_view(
            self.submitted,
            known,
            self.holding,
            placed,
            capacity=capacity,
            needs=needs,
            truth=truth,
            type_truths=(
                {t: p.speed_model for t, p in typed.items()} if typed and needs.true_model else None
            ),
        )

    @property
    def running(self) -> bool:
        return self.workers > 0 and not self.suspended

    def rate(self) -> float:
        """Fraction of the job completed per second of productive time."""
        profile = self.truth
        if profile.placed:
            seconds = profile.seconds_on(self.placement(), 1.0 - self.remaining)
        else:
            seconds = profile.seconds_alone(self.workers)
        alone = 1.0 / (self.job.work_scale * seconds)
        return alone * self.factor * self.kept

    def step_time(self) -> float:
        """The minibatch time the job would report now."""
        if self.factor <= 0:
            return math.inf
        if self.job.minibatches is not None:
            return 1.0 / (self.rate() * self.job.minibatches)
        profile = self.truth
        if profile.placed:
            return profile.step_time_on(self.placement(), 1.0 - self.remaining) / self.factor
        return profile.step_time(self.workers) / self.factor

    def placement(self) -> tuple[int, ...]:
        """GPUs the job runs on per node, nodes in the order its devices name them."""
        return per_node(self.devices[: self.workers])

    def pace(self) -> None:
        """Fix ``speed``, ``step`` and ``batch`` for the GPUs and sharing just worked out:
        a running job advances at every event, and these change only with its size or
        its sharing, so they are worked out again only when those did."""
        phase = self.truth.phase(1.0 - self.remaining) if self.phased else 0
        if phase != self.phase:
            if self.held_types:
                self._retype()  # a new epoch's batch: the ratio between types moves too
            self.seen = None  # and the gradient statistics it reports
        paced_for = (self.workers, self.factor, self.type_factor)
        if paced_for == self.paced_for and phase == self.phase:
            return
        self.paced_for = paced_for
        self.phase = phase
        self.speed = self.rate()
        step = self.step_time()
        if 0 < self.type_factor < 1 or self.type_factor > 1:
            step *= self.type_factor
        self.step = step
        profile = self.truth
        self.batch = (
            profile.batch_on(self.placement(), 1.0 - self.remaining)
            if profile.phased
            else profile.shape.batch_at(self.workers)
        )

    def _retype(self) -> None:
        """Work ``type_factor``, and ``factor`` with it, out again from the type tables."""
        before = self.type_factor
        job = self.job
        assert job.type_profiles is not None and job.type_speed is not None
        after = self.type_factor = table_speed(
            job.profile,
            job.type_profiles,
            job.type_speed,
            self.held_types,
            self.placement(),
            1.0 - self.remaining,
        )
        self.factor = self.factor / before * after if before > 0 else after

    def finish_time(self, now: float) -> float:
        """When the job ends at its speed now; a ``phased`` profile's, when its speed
        next changes (the end of its epoch), where that is sooner: the engine stops it
        there to work its speed out again."""
        if not self.running or self.factor <= 0:
            return math.inf
        left = self.remaining
        if self.phased:
            left = min(left, self.truth.phase_end(1.0 - left) - (1.0 - left))
        return max(now, self.ready_at) + left / self.speed

    def advance(self, start: float, end: float) -> None:
        if not self.running:
            return
        self.progressed = True
        self.attained_gpu_s += self.workers * (end - start)
        speeds = self.job.type_speed
        if speeds:
            best = max(speeds.values())
            weight = self.type_factor / best if best > 0 else 1.0
            self.attained_effective_s += self.workers * (end - start) * weight
        begin = max(start, self.ready_at)
        productive = end - begin
        if productive <= 0:
            return
        before = self.remaining
        self.remaining = max(0.0, self.remaining - productive * self.speed)
        total = self.job.minibatches
        if self.first_at is None and total is not None:
            goal = 1.0 - min(FIRST_MINIBATCHES, total) / total
            if self.remaining <= goal + DONE:
                self.first_at = begin + (before - goal) / self.speed
        step, batch = self.step, self.batch
        if self.partners:
            for other in self.partners:
                self.packed[other] = fold(self.packed.get(other), step, productive, batch)
        else:
            seen = self.observations
            was = seen.get(self.workers)
            now = seen[self.workers] = fold(was, step, productive, batch)
            if (
                was is None
                or now.step_time != was.step_time
                or now.batch_per_worker != was.batch_per_worker
            ):
                self.seen = None  # a view stands for one set of step times (spine.views)


def per_node(devices: tuple[Device, ...]) -> tuple[int, ...]:
    """How many of ``devices`` are on each node, nodes in the order ``devices`` name them."""
    counts: dict[str, int] = {}
    for d in devices:
        counts[d.node] = counts.get(d.node, 0) + 1
    return tuple(counts.values())


def arrived(job: SimJob, now: float) -> JobState:
    """``JobState(job, state_since=now)``: a job the simulator admits at ``now``.

    Made empty and each field stored, as the class's defaults say (``test_simulator``
    checks the two field by field): the dataclass's ``__init__`` is the dataclass
    module's, interpreted even compiled, and sets its 32 fields through Python's
    attribute protocol, where stores from here are plain stores (docs/scale.md, "Views
    the bodies keep, and the memo on each view").
    """
    state = JobState.__new__(JobState)
    state.job = job
    state.remaining = 1.0
    state.devices = ()
    state.workers = 0
    state.ready_at = 0.0
    state.started_at = None
    state.finished_at = None
    state.counts = EventCounts()
    state.last = None
    state.observations = {}
    state.attained_gpu_s = 0.0
    state.attained_effective_s = 0.0
    state.suspended = False
    state.state_since = now
    state.pending_restart = False
    state.packed = {}
    state.partners = ()
    state.factor = 1.0
    state.speed = 0.0
    state.step = math.inf
    state.batch = 0.0
    state.paced_for = (0, 0.0, 0.0)
    state.type_factor = 1.0
    state.held_types = ()
    state.phase = 0
    state.first_at = None
    state.priority = 0
    state.seen = None
    state.progressed = False
    state.target = WAIT
    state.holding = Held()
    state.kept = 1.0
    state.__post_init__()  # epochs, priority, phased, truth, submitted
    return state
