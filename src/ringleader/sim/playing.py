"""The simulator's effects (``spine.effects``): time is the only effect a simulated action has.

A launch costs the job its start-up (its first) or its restart (any later
one), a resume the switch delay; each counted event is counted on the job.
A stop and a launch apply at once: the job is ready on its new devices once
the launch's cost has passed.
"""

from __future__ import annotations

from ringleader.policy.model.views import Device
from ringleader.sim.jobs import JobState
from ringleader.spine.actions import Kind, Why


class Playing:
    """``spine.effects.Effects`` for simulated jobs, at ``now``.

    ``alive``: whether the job being carried out has live processes after its
    actions (a stop ends them, a launch starts them); the engine sets it from
    what the job held before each job and reads it after.
    """

    __slots__ = ("alive", "now", "restart_delay_s", "switch_delay_s")

    stops_at_once = True

    def __init__(self, restart_delay_s: float, switch_delay_s: float) -> None:
        self.restart_delay_s = restart_delay_s
        self.switch_delay_s = switch_delay_s
        self.now = 0.0
        self.alive = False

    def launch(self, job: JobState, devices: tuple[Device, ...], kind: Kind) -> None:
        self.alive = True
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
