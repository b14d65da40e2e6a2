"""Moving a suspended job's model and optimizer state off the GPU and back.

Suspended on a GPU, a job frees the device for another: its model and
optimizer state move to host memory and the allocator's cache is emptied.
"""

from __future__ import annotations

from typing import Any


def offload(model: Any, optimizer: Any, to: str) -> None:
    """Move ``model`` and ``optimizer``'s tensors to ``to`` ("cpu" or "cuda")."""
    import torch

    device = torch.device(to, 0) if to == "cuda" else torch.device("cpu")
    model.to(device)
    for state in optimizer.state.values():
        for key, value in state.items():
            if isinstance(value, torch.Tensor):
                state[key] = value.to(device)
    if to == "cpu":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
