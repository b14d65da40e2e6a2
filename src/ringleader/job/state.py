"""What a job's checkpoint holds: its training state and its place in the data.

Progress is counted in examples, so a job restored at another world size
keeps its place in the data; the global step counts minibatches.
"""

from __future__ import annotations

from typing import Any


def training_state(
    model: Any, optimizer: Any, extra: dict[str, Any], step: int, examples_seen: int
) -> dict[str, Any]:
    """The state to save: a DDP-wrapped model's own module, the optimizer, ``extra``."""
    model = getattr(model, "module", model)
    return {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "extra": {k: v.state_dict() for k, v in extra.items()},
        "step": step,
        "examples_seen": examples_seen,
    }


def load_training_state(
    state: dict[str, Any], model: Any, optimizer: Any, extra: dict[str, Any]
) -> tuple[int, int]:
    """Load ``state`` into the objects; the step and examples seen it was saved at."""
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    for name, obj in extra.items():
        obj.load_state_dict(state["extra"][name])
    return int(state["step"]), int(state["examples_seen"])
