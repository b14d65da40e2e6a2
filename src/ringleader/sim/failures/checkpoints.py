"""What a checkpoint costs a job, and how often it takes one.

A checkpoint stops a job's progress for ``cost_s`` (its state over the write
bandwidth, or a stated figure); between two, it runs ``interval_s``. A
failure throws away the progress since the last one. The interval that
balances the two is Young's (1974), ``sqrt(2 · C · M)`` for a checkpoint cost
``C`` and a mean time between failures ``M``, the first-order term of Daly's
(2006) optimum: each checkpoint costs ``C``, each failure half an interval on
average, and ``C/τ + τ/(2M)`` is least there.

A gang's ``M`` is its failure rate's inverse, from the GPUs and nodes it spans
(``FailureModel.unexpected_per_hour``): the wider the gang, the more often it
should checkpoint.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ringleader.sim.failures.model import FailureInputError, FailureModel

YOUNG_DALY = "young-daly"
NEVER = "never"


def young_daly(cost_s: float, mtbf_s: float) -> float:
    """Young's interval, ``sqrt(2 · cost · mtbf)`` (inf where the gang never fails)."""
    if cost_s < 0 or mtbf_s <= 0:
        raise FailureInputError(f"need cost_s >= 0 and mtbf_s > 0, got {cost_s} and {mtbf_s}")
    return math.sqrt(2.0 * cost_s * mtbf_s) if math.isfinite(mtbf_s) else math.inf


def checkpoint_cost_s(state_bytes: float, write_bytes_per_s: float, fixed_s: float = 0.0) -> float:
    """Seconds to write ``state_bytes`` at ``write_bytes_per_s``, plus ``fixed_s``."""
    for name, value in (("state_bytes", state_bytes), ("fixed_s", fixed_s)):
        if not (math.isfinite(value) and value >= 0):
            raise FailureInputError(f"{name}: {value!r} must be a finite number >= 0")
    if not (math.isfinite(write_bytes_per_s) and write_bytes_per_s > 0):
        raise FailureInputError(
            f"write_bytes_per_s: {write_bytes_per_s!r} must be a finite number > 0"
        )
    return state_bytes / write_bytes_per_s + fixed_s


@dataclass(frozen=True, slots=True)
class Checkpointing:
    """A rule for how often jobs checkpoint, and what one costs them.

    ``rule``: ``"young-daly"`` (each gang's own optimum), ``"never"`` (a failure
    loses everything since the launch), or seconds between checkpoints.
    """

    rule: str | float = YOUNG_DALY
    cost_s: float = 60.0
    """Seconds a checkpoint stops a job for, where the job does not say its own."""

    def __post_init__(self) -> None:
        if isinstance(self.rule, str):
            if self.rule not in (YOUNG_DALY, NEVER):
                raise FailureInputError(
                    f"checkpoint rule: {self.rule!r} is not one of {YOUNG_DALY!r}, {NEVER!r} "
                    "or a number of seconds"
                )
        elif not (math.isfinite(self.rule) and self.rule > 0):
            raise FailureInputError(f"checkpoint interval: {self.rule!r} must be seconds > 0")
        if not (math.isfinite(self.cost_s) and self.cost_s >= 0):
            raise FailureInputError(f"checkpoint cost_s: {self.cost_s!r} must be seconds >= 0")

    @property
    def name(self) -> str:
        if isinstance(self.rule, str):
            return self.rule
        return f"every {self.rule / 3600:g} h"

    def interval_s(self, cost_s: float, model: FailureModel, gpus: int, nodes: int) -> float:
        """Seconds of progress between checkpoints for a gang on ``gpus`` GPUs over
        ``nodes`` nodes (inf: it never checkpoints)."""
        if self.rule == NEVER:
            return math.inf
        if self.rule == YOUNG_DALY:
            rate = model.unexpected_per_hour(gpus, nodes)
            return young_daly(cost_s, 3600.0 / rate if rate > 0 else math.inf)
        assert not isinstance(self.rule, str)
        return float(self.rule)
