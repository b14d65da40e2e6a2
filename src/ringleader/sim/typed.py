"""Ground truth on a cluster of GPU types, where a job was measured on each type.

A job measured per type (``SimJob.type_profiles``) runs on a type at that type's
table's speed for the placement it holds, not at one factor per type: the ratio
between two types moves with the placement (a slow interconnect costs more the
more nodes a job spans) and, for a job that adapts its batch, with the epoch. The
engine keeps a job's speed as its first type's profile times ``type_factor``;
this module works that factor out from the tables, so the rest of the simulator
reads a typed job as it reads any other.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from contextlib import suppress

from ringleader.perf.placements import OutsideMeasurements, Placement
from ringleader.sim.profiles import TrueProfile


def table_speed(
    profile: TrueProfile,
    type_profiles: Mapping[str, TrueProfile],
    type_speed: Mapping[str, float],
    types: Iterable[str],
    placement: Placement,
    done: float,
) -> float:
    """A job's speed on GPUs of ``types`` over its speed on ``profile``'s type, at
    ``placement`` and ``done`` of the way through: its slowest type's, as a gang
    waits for its slowest GPU.

    Where a type's table cannot answer the placement (wider than it was measured),
    the type's one factor (``type_speed``) stands in for it.
    """
    reference = profile.seconds_on(placement, done)
    slowest = float("inf")
    for gpu_type in types:
        on = type_profiles.get(gpu_type)
        if on is profile:
            speed = 1.0
        else:
            speed = type_speed.get(gpu_type, 1.0)
            if on is not None:
                with suppress(OutsideMeasurements):
                    speed = reference / on.seconds_on(placement, done)
        slowest = min(slowest, speed)
    return 1.0 if slowest == float("inf") else slowest
