"""A workload file's ``topology:`` section: racks' links, and how gangs are placed on them.

Off unless the section is there. It needs a cluster that names racks
(``cluster.nodes_per_rack``); each job says what share of its step it spends
synchronising (``comm_share``), which grows when it spans racks
(``sim.topology``). ``placement`` picks the place stage: ``blind``, the
policy's own; ``preferred`` or ``required``, ``FewestRacks``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Annotated, Literal, Protocol

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


class _Sized(Protocol):
    """A workload file's job entry, as far as racks are concerned."""

    @property
    def elastic(self) -> bool: ...

    @property
    def gpus(self) -> int: ...

    @property
    def min_gpus(self) -> int: ...


def check_racks(
    nodes_per_rack: int | None,
    gpus_per_node: int | None,
    topology: TopologySpec | None,
    entries: Sequence[tuple[str, Sequence[_Sized]]],
) -> None:
    """A topology on a cluster with racks; under ``required``, every job within one
    (raises ``ValueError`` naming the field)."""
    if topology is None:
        return
    if nodes_per_rack is None:
        raise ValueError("topology: the cluster names no racks; give cluster.nodes_per_rack")
    if topology.placement != "required":
        return
    rack = nodes_per_rack * (gpus_per_node or 0)
    for kind, jobs in entries:
        for i, entry in enumerate(jobs):
            field = "min_gpus" if entry.elastic else "gpus"
            least = getattr(entry, field)
            if least > rack:
                raise ValueError(
                    f"{kind}[{i}].{field}: {least} GPUs cannot fit in one rack of {rack} "
                    f"and topology.placement is required; lower {field}, or make "
                    "placement preferred"
                )
