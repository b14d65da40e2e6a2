"""The simulator's effects (``spine.effects``): time is the only effect a simulated action has.

A launch costs the job its start-up (its first) or its restart (any later
one), a resume the switch delay; each counted event is counted on the job.
A stop and a launch apply at once: the job is ready on its new devices once
the launch's cost has passed.
"""

from __future__ import annotations

from ringleader.policy.model.needs import Needs
from ringleader.policy.model.views import Device
from ringleader.sim.jobs import JobState
from ringleader.spine.actions import Kind, Why
from ringleader.spine.batching import launch_share
from ringleader.spine.kin import KinBook


class Handing:
    """The batch a job that takes it from the scheduler is handed at a launch: chosen by
    ``spine.batching`` from the job's view as the policy saw it, as the runtime does."""

    __slots__ = ("book", "capacity", "needs", "per_node", "restart_s")

    def __init__(
        self, capacity: int, needs: Needs, restart_s: float, book: KinBook, per_node: int
    ) -> None:
        self.capacity, self.needs, self.restart_s = capacity, needs, restart_s
        self.book, self.per_node = book, per_node

    def hand(self, job: JobState, gpus: int) -> None:
        """Set ``job.truth`` to its profile at the batch chosen for ``gpus`` GPUs."""
        bounds = job.job.batch
        assert bounds is not None
        view = job.view(self.capacity, self.needs, self.restart_s, self.book)
        per_gpu, accumulate = launch_share(view, gpus, bounds, self.per_node)
        job.truth = job.job.profile.launched(gpus, per_gpu, accumulate, 1.0 - job.remaining)
        job.paced_for = (0, 0.0, 0.0)  # its speed, step and batch are the new batch's
        job.seen = None  # and so is the shape its view tells


class Playing:
    """``spine.effects.Effects`` for simulated jobs, at ``now``.

    ``alive``: whether the job being carried out has live processes after its
    actions (a stop ends them, a launch starts them); the engine sets it from
    what the job held before each job and reads it after.
    """

    __slots__ = ("alive", "handing", "now", "restart_delay_s", "switch_delay_s")

    stops_at_once = True

    def __init__(
        self, restart_delay_s: float, switch_delay_s: float, handing: Handing | None = None
    ) -> None:
        self.restart_delay_s = restart_delay_s
        self.switch_delay_s = switch_delay_s
        self.handing = handing
        """Where some job takes the batch it is handed at a launch (``SimJob.batch``)."""
        self.now = 0.0
        self.alive = False

    def launch(self, job: JobState, devices: tuple[Device, ...], kind: Kind) -> None:
        self.alive = True
        if self.handing is not None and job.job.batch is not None:
            self.handing.hand(job, len(devices))
        job.ready_at = self.now + self.launch_s(job)
        if job.started_at is None:
            job.started_at = self.now
        job.last = devices
        job.counts.add(kind)

    def stop(self, job: JobState, why: Why) -> None:
        self.alive = False  # checkpointed; restarts when it next runs

    def suspend(self, job: JobState) -> None:
        job.counts.add(Kind.SUSPEND)

    def resume(self, job: JobState) -> None:
        job.ready_at = self.now + self.switch_delay_s
        job.counts.add(Kind.RESUME)

    def launch_s(self, job: JobState) -> float:
        """What a launch costs the job: its own measured start-up or restart, if known."""
        own = job.job.startup_s if job.started_at is None else job.job.restart_s
        return self.restart_delay_s if own is None else own
