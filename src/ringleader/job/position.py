"""Where ``ringleader.elastic`` training is, saved with every checkpoint.

Its own module so that what a checkpoint holds of the light API's progress is
read in one place: the epoch and the examples of it trained on, the
learning-rate factor the optimizer carries, the gradient statistics, and
(where the batch adapts) the progress counted at ``global_min``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ringleader.job.noise import NoiseScale


@dataclass(slots=True)
class Position:
    """Where training is, saved with every checkpoint: the epoch under way and its progress."""

    epoch: int = 0
    """Index of the epoch under way, counted from the first one trained."""
    consumed: int = 0
    """Examples of that epoch already trained on, over all ranks."""
    lr_factor: float = 1.0
    """The factor the learning rates in the optimizer carry (from the rule at its world)."""
    noise: NoiseScale = field(default_factory=NoiseScale)
    """The gradient's statistics measured so far: a restart goes on from them."""
    progress: float = 0.0
    """Where the batch adapts: examples trained on, each step counted as the steps at
    ``global_min`` it is worth (AdaScale's scale-invariant progress)."""

    def state_dict(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "consumed": self.consumed,
            "lr_factor": self.lr_factor,
            "noise": self.noise.state_dict(),
            "progress": self.progress,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.epoch, self.consumed = int(state["epoch"]), int(state["consumed"])
        self.lr_factor = float(state["lr_factor"])
        self.noise.load_state_dict(state.get("noise", {}))  # none in older checkpoints
        self.progress = float(state.get("progress", 0.0))
