"""Steering a run from outside: a driver that reprioritises jobs as they progress.

A hyper-parameter search (Gandiva's AutoML scenario) watches every job's
progress and raises or lowers priorities, or ends the run; the engine asks it
at each decision.
"""

from __future__ import annotations

from typing import Protocol

from ringleader.sim.jobs import JobState


class Driver(Protocol):
    """Something that watches jobs progress and steers them (a hyper-parameter search)."""

    def steer(self, now: float, done: dict[str, float]) -> dict[str, int] | None:
        """Given each active job's done fraction, new priorities by id; None ends the run."""
        ...


def steer(driver: Driver | None, active: dict[str, JobState], now: float) -> bool:
    """Give ``driver`` each job's progress and take its new priorities; False where it
    ends the run."""
    assert driver is not None
    steered = driver.steer(now, {i: 1.0 - s.remaining for i, s in active.items()})
    if steered is None:
        return False
    for job_id, priority in steered.items():
        if job_id in active:
            active[job_id].priority = priority
            active[job_id].seen = None
    return True
