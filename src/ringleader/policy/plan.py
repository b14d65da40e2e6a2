"""The policy's output: the desired state of every job, for a body to carry out."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ringleader.policy.views import Device


@dataclass(frozen=True, slots=True)
class Assignment:
    """Where one job runs.

    ``devices`` are the GPUs the job holds; its ``workers`` run on the first
    ``workers`` of them. Holding more than it uses is how exploratory profiling
    keeps its largest probe size free while it measures the smaller ones.
    A job with no devices waits.
    """

    devices: tuple[Device, ...] = ()
    workers: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.workers <= len(self.devices):
            raise ValueError(f"workers ({self.workers}) must be within 0..{len(self.devices)}")

    @property
    def running(self) -> bool:
        return self.workers > 0

    @property
    def active_devices(self) -> tuple[Device, ...]:
        return self.devices[: self.workers]


WAIT = Assignment()


@dataclass(frozen=True, slots=True)
class Plan:
    """Desired state of every job in the snapshot.

    ``wake_at``: the latest time the policy wants to be asked again (e.g. when
    a profiling probe should have finished), or ``None``.
    """

    assignments: Mapping[str, Assignment]
    wake_at: float | None = None

    def of(self, job_id: str) -> Assignment:
        return self.assignments.get(job_id, WAIT)

    @property
    def busy_gpus(self) -> int:
        return sum(a.workers for a in self.assignments.values())

    @property
    def held_gpus(self) -> int:
        return sum(len(a.devices) for a in self.assignments.values())
