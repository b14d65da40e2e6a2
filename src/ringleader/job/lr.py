"""Learning rate for a job whose world size changes while it trains (SPEC A5).

With the per-worker batch fixed, ``w`` workers make a ``w`` times larger global
batch, and the linear scaling rule (Goyal et al. 2017) multiplies the learning
rate by ``w``: ``η(w) = w·η(1)``. Decay steps (÷10 by default) happen at fixed
*epochs*, not steps, so a job resized mid-training decays at the same point of
its data whatever sizes it ran at.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

LR_RULES = ("none", "linear", "sqrt", "adascale")


def lr_factor(rule: str, world: float, base_world: float = 1) -> float:
    """How much ``rule`` multiplies a learning rate tuned at ``base_world`` workers (or
    examples per step, where the batch adapts)."""
    if rule == "none":
        return 1.0
    if rule == "linear":
        return world / base_world
    if rule == "sqrt":
        return math.sqrt(world / base_world)
    if rule == "adascale":
        return 1.0  # its gain needs the gradient's statistics: see ``_lr_factor``
    raise ValueError(f"lr_rule {rule!r}: choose one of {', '.join(LR_RULES)}")


@dataclass(frozen=True, slots=True)
class LearningRateSchedule:
    base_lr: float = 0.1
    """Learning rate for one worker at the reference per-worker batch."""
    decay_epochs: tuple[float, ...] = ()
    decay_factor: float = 0.1

    def __post_init__(self) -> None:
        if not self.base_lr > 0:
            raise ValueError(f"base_lr must be positive, got {self.base_lr}")
        if not 0 < self.decay_factor <= 1:
            raise ValueError(f"decay_factor must be in (0, 1], got {self.decay_factor}")
        if list(self.decay_epochs) != sorted(self.decay_epochs):
            raise ValueError(f"decay_epochs must be increasing, got {self.decay_epochs}")

    def at(self, world_size: int, epoch: float) -> float:
        """The learning rate for ``world_size`` workers at (fractional) ``epoch``."""
        if world_size < 1:
            raise ValueError(f"world_size must be at least 1, got {world_size}")
        decays = sum(1 for e in self.decay_epochs if epoch >= e)
        return self.base_lr * world_size * self.decay_factor**decays
