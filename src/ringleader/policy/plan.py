"""The policy's output: the desired state of every job, for a body to carry out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from ringleader.policy.needs import Needs
from ringleader.policy.views import ClusterView, Device, JobView


@dataclass(frozen=True, slots=True)
class Assignment:
    """Where one job runs.

    ``devices`` are the GPUs the job holds; its ``workers`` run on the first
    ``workers`` of them. Holding more than it uses is how exploratory profiling
    keeps its largest probe size free while it measures the smaller ones.
    A job with no devices waits.

    ``suspended``: the job keeps its place on its GPUs but does not run this
    quantum (time-slicing); its state waits in host memory, so resuming it on
    the same GPUs costs a fraction of a second instead of a restart. Two
    running jobs may name the same GPU: they are packed onto it.
    """

    devices: tuple[Device, ...] = ()
    workers: int = 0
    suspended: bool = False

    def __post_init__(self) -> None:
        if not 0 <= self.workers <= len(self.devices):
            raise ValueError(f"workers ({self.workers}) must be within 0..{len(self.devices)}")

    @property
    def running(self) -> bool:
        return self.workers > 0 and not self.suspended

    @property
    def resident(self) -> bool:
        """Placed on GPUs, running or suspended."""
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
        """GPUs on which some job runs now (a packed GPU counts once)."""
        # (node, index) keys: tuples hash in C, Devices through Python (10k-job runs).
        return len(
            {
                (d.node, d.index)
                for a in self.assignments.values()
                if a.running
                for d in a.active_devices
            }
        )

    @property
    def held_gpus(self) -> int:
        """GPUs some job holds, running, suspended or reserved."""
        return len({(d.node, d.index) for a in self.assignments.values() for d in a.devices})


class Decider(Protocol):
    """What a body (simulator or runtime) calls: a pure function of the snapshot."""

    @property
    def name(self) -> str: ...

    @property
    def needs(self) -> Needs:
        """What the policy relies on a body to supply (see ``ringleader.policy.needs``)."""
        ...

    def decide(self, jobs: Sequence[JobView], cluster: ClusterView, now: float) -> Plan: ...
