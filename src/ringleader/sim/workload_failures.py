"""A workload file's ``failures:`` section: nodes that fail during the run, and checkpoints.

Off unless the section is there, so every other file plays as before. Each
rate defaults to the Llama 3 report's (``sim.failures.model``); the outages
are drawn once per run over ``horizon_days`` from ``seed``. See
``docs/failures.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from ringleader.policy.model.views import ClusterView
from ringleader.sim.failures import Checkpointing, FailureModel, Failures, draw_outages

_DEFAULTS = FailureModel()

Rate = Annotated[float, Field(ge=0, le=1.0, allow_inf_nan=False)]
"""Failures per hour of one GPU or node: at most one an hour, far past any real one."""
OutSeconds = Annotated[float, Field(ge=0, le=365 * 86_400.0, allow_inf_nan=False)]


class FailuresSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    gpu_per_hour: Rate = _DEFAULTS.gpu_per_hour
    node_per_hour: Rate = _DEFAULTS.node_per_hour
    planned_per_hour: Rate = _DEFAULTS.planned_per_hour
    rack_per_hour: Rate = 0.0
    """Each rack's switch fails this often, taking every node of it out (a cluster
    that names racks only: ``cluster.nodes_per_rack``)."""
    repair_s: OutSeconds = _DEFAULTS.repair_s
    planned_s: OutSeconds = _DEFAULTS.planned_s
    seed: Annotated[int, Field(ge=0, le=2**63 - 1)] = 0
    horizon_days: Annotated[float, Field(gt=0, le=3650, allow_inf_nan=False)] = 365.0
    """Outages are drawn over this many days from the first submission; none after."""
    checkpoint: Literal["young-daly", "never"] | Annotated[float, Field(gt=0, le=1e7)] = (
        "young-daly"
    )
    """How often jobs checkpoint: Young/Daly's interval for each gang, never, or seconds."""
    checkpoint_cost_s: Annotated[float, Field(ge=0, le=86_400.0, allow_inf_nan=False)] = 60.0
    """What a checkpoint costs a job that does not give its own (``checkpoint_s``)."""

    def model(self) -> FailureModel:
        return FailureModel(
            self.gpu_per_hour,
            self.node_per_hour,
            self.planned_per_hour,
            self.rack_per_hour,
            self.repair_s,
            self.planned_s,
        )

    def for_run(
        self,
        cluster: ClusterView,
        start: float,
        cost_s: Mapping[str, float],
        every_s: Mapping[str, float],
    ) -> Failures:
        """Fresh failures for one run: its outages, and each job's checkpoint cost and
        interval where it gives its own."""
        model = self.model()
        racks: dict[str, list[str]] = {}
        for node in cluster.nodes:
            if node.rack:
                racks.setdefault(node.rack, []).append(node.name)
        horizon = self.horizon_days * 86_400.0
        outages = draw_outages(model, cluster, horizon, seed=self.seed, start=start, racks=racks)
        rule = Checkpointing(self.checkpoint, self.checkpoint_cost_s)
        return Failures(
            outages, cluster, model=model, checkpointing=rule, cost_s=cost_s, every_s=every_s
        )
