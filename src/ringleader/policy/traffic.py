"""Traffic priority for co-located parameter servers (TensorLights, SPEC B).

Where several jobs' parameter servers share a host, their model updates leave
through one NIC. FIFO interleaves them, so every job's slowest worker gets its
update late; giving each job its own priority lets one job's update through
at a time, so its barrier releases early and its next compute phase overlaps
the others' transfers.

* ``FIFO`` — no priorities.
* ``ONE`` — one fixed order (submission order): rank 0 is served first.
* ``ROUND_ROBIN`` — the same order rotated every ``interval_s``, so every job
  takes its turn at the front.

Pure: the rotation comes from ``now``, not from a timer.

``Priorities`` is the traffic stage of a ``Policy``: after the plan is made it
ranks, on every node where the parameter servers of two or more running jobs
send, those jobs in the order stage's order — so the job the policy would
serve first also gets the NIC first. A body that can shape a NIC applies the
ranks (``ringleader.runtime.control.traffic``); the others run the plan without them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from ringleader.policy.model.plan import Assignment
from ringleader.policy.model.views import JobView
from ringleader.policy.share.timeslice import boundary_after


class TrafficPolicy(StrEnum):
    FIFO = "fifo"
    ONE = "one"
    ROUND_ROBIN = "rr"


DEFAULT_ROTATION_S = 20.0


def traffic_priorities(
    jobs_on_host: Sequence[str],
    policy: TrafficPolicy,
    now: float,
    interval_s: float = DEFAULT_ROTATION_S,
) -> Mapping[str, int]:
    """Priority rank (0 = first) of each job whose PS is on one host; empty for FIFO.

    ``jobs_on_host`` must be in the order the policy should favour (for
    example submission order).
    """
    if policy is TrafficPolicy.FIFO or not jobs_on_host:
        return {}
    n = len(jobs_on_host)
    shift = 0
    if policy is TrafficPolicy.ROUND_ROBIN:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be positive, got {interval_s}")
        shift = int(now // interval_s) % n
    return {job: (i - shift) % n for i, job in enumerate(jobs_on_host)}


HostRanks = Mapping[str, Mapping[str, int]]
"""Per node, the rank (0 first) of each job whose parameter server sends from it."""


class Traffic(Protocol):
    """The traffic stage: priorities for parameter servers that share a host's NIC."""

    def ranks(
        self, assignments: Mapping[str, Assignment], ordered: Sequence[JobView], now: float
    ) -> HostRanks:
        """Ranks per node for the running jobs of ``assignments``; ``ordered`` is the
        order stage's order (first: most favoured)."""
        ...

    def wake_at(self, ranks: HostRanks, now: float) -> float | None:
        """When the ranks change with no event (a rotation), or None."""
        ...


@dataclass(frozen=True, slots=True)
class Priorities:
    """TensorLights as a stage: one ``TrafficPolicy`` on every node where PSes meet."""

    policy: TrafficPolicy = TrafficPolicy.ONE
    interval_s: float = DEFAULT_ROTATION_S

    def __post_init__(self) -> None:
        if not (math.isfinite(self.interval_s) and self.interval_s > 0):
            raise ValueError(f"interval_s must be positive, got {self.interval_s}")

    def ranks(
        self, assignments: Mapping[str, Assignment], ordered: Sequence[JobView], now: float
    ) -> HostRanks:
        if self.policy is TrafficPolicy.FIFO:
            return {}
        senders: dict[str, list[str]] = {}
        for job in ordered:
            if not job.parameter_server:
                continue
            a = assignments.get(job.id)
            if a is not None and a.running:
                # Rank 0, the PS, runs on the first of the job's devices.
                senders.setdefault(a.devices[0].node, []).append(job.id)
        return {
            node: traffic_priorities(jobs, self.policy, now, self.interval_s)
            for node, jobs in senders.items()
            if len(jobs) > 1
        }

    def wake_at(self, ranks: HostRanks, now: float) -> float | None:
        if self.policy is not TrafficPolicy.ROUND_ROBIN or not ranks:
            return None
        return boundary_after(now, self.interval_s)
