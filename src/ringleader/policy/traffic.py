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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum


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
