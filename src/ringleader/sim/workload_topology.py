"""A workload file's ``topology:`` section: racks' links, and how gangs are placed on them.

Off unless the section is there. It needs a cluster that names racks
(``cluster.nodes_per_rack``); each job says what share of its step it spends
synchronising (``comm_share``), which grows when it spans racks
(``sim.topology``). ``placement`` picks the place stage: ``blind``, the
policy's own; ``preferred`` or ``required``, ``FewestRacks``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ringleader.policy.model.plan import Decider
from ringleader.policy.pipeline import Policy
from ringleader.policy.place.racks import FewestRacks
from ringleader.sim.topology import Topology

Gbps = Annotated[float, Field(gt=0, le=1e6, allow_inf_nan=False)]


class TopologySpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    within_rack_gbps: Gbps = 400.0
    across_racks_gbps: Gbps = 100.0
    placement: Literal["blind", "preferred", "required"] = "preferred"
    """``required``: a job that fits a rack waits for one; a file whose job is wider
    than a rack is refused then (it could never be placed as asked)."""

    @model_validator(mode="after")
    def _ordered(self) -> TopologySpec:
        if self.across_racks_gbps > self.within_rack_gbps:
            raise ValueError(
                f"across_racks_gbps ({self.across_racks_gbps:g}) is above within_rack_gbps "
                f"({self.within_rack_gbps:g}): links between racks are no faster than within"
            )
        return self

    def topology(self) -> Topology:
        return Topology(self.within_rack_gbps, self.across_racks_gbps)

    def placed(self, policy: Decider) -> Decider | None:
        """``policy`` with this placement (None: it has no place stage to change)."""
        if self.placement == "blind":
            return policy
        if not isinstance(policy, Policy):
            return None
        return replace(policy, place=FewestRacks(required=self.placement == "required"))
