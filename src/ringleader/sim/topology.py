"""What spanning racks costs a gang: the simulator's truth about the network's levels.

A gang synchronises its gradient every step; within a rack the links between
nodes are fast, between racks they are shared by a rack's worth of nodes
(an oversubscribed spine) and slower. A job whose step spends ``comm_share`` of
its time synchronising across nodes within one rack (``SimJob.comm_share``)
spends ``comm_share · within / across`` of it when it spans racks, as the
allreduce takes as long as its slowest link (``Topology.speed``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ringleader.sim.failures import FailureInputError


@dataclass(frozen=True, slots=True)
class Topology:
    """Per-GPU bandwidth between nodes within a rack, and between racks."""

    within_rack_gbps: float = 400.0
    across_racks_gbps: float = 100.0

    def __post_init__(self) -> None:
        for name in ("within_rack_gbps", "across_racks_gbps"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise FailureInputError(f"{name}: {value!r} must be a finite number > 0")
        if self.across_racks_gbps > self.within_rack_gbps:
            raise FailureInputError(
                f"across_racks_gbps: {self.across_racks_gbps:g} is above within_rack_gbps "
                f"({self.within_rack_gbps:g}); links between racks are no faster than within"
            )

    def speed(self, comm_share: float, racks: int) -> float:
        """A gang's speed on ``racks`` racks relative to on one."""
        if racks <= 1 or comm_share <= 0:
            return 1.0
        slower = self.within_rack_gbps / self.across_racks_gbps
        return 1.0 / ((1.0 - comm_share) + comm_share * slower)
