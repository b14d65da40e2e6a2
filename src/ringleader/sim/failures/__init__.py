"""Failures, checkpoints and what they cost, in the simulator (issue 61).

``model``: failure rates, calibrated to Meta's Llama 3 report, and the outages
drawn from them. ``checkpoints``: what a checkpoint costs and how often one is
taken (Young/Daly). ``run``: the outages played in a run, the engine's one
hook. ``ledger``: ETTR and lost GPU-hours by cause.
"""

from ringleader.sim.failures.checkpoints import (
    NEVER,
    YOUNG_DALY,
    Checkpointing,
    checkpoint_cost_s,
    young_daly,
)
from ringleader.sim.failures.ledger import CAUSES, ClusterLedger, JobLedger
from ringleader.sim.failures.model import FailureInputError, FailureModel, Outage, draw_outages
from ringleader.sim.failures.run import Failures

__all__ = [
    "CAUSES",
    "NEVER",
    "YOUNG_DALY",
    "Checkpointing",
    "ClusterLedger",
    "FailureInputError",
    "FailureModel",
    "Failures",
    "JobLedger",
    "Outage",
    "checkpoint_cost_s",
    "draw_outages",
    "young_daly",
]
