"""Deterministic synthetic batches with a learnable labelling."""

from __future__ import annotations

from typing import Any


def teacher_batch(
    step: int, rank: int, batch: int, shape: tuple[int, ...], classes: int, seed: int = 0
) -> tuple[Any, Any]:
    """Noisy images of fixed random class templates: easy to start on, slow to finish.

    Labels are uniform; each input is its class's template (a fixed random
    pattern) at low contrast plus unit Gaussian noise.
    """
    import torch

    g = torch.Generator().manual_seed(seed * 1_000_003 + step * 1_009 + rank)
    y = torch.randint(0, classes, (batch,), generator=g)
    templates = torch.randn((classes, *shape), generator=torch.Generator().manual_seed(seed + 7))
    x = torch.randn((batch, *shape), generator=g) + 0.5 * templates[y]
    return x, y


def token_batch(step: int, rank: int, batch: int, length: int, vocab: int, seed: int = 0) -> Any:
    """Token sequences from a fixed random bigram table: predictable, so learnable."""
    import torch

    table = torch.Generator().manual_seed(seed + 11)
    nxt = torch.randint(0, vocab, (vocab, 2), generator=table)
    g = torch.Generator().manual_seed(seed * 1_000_003 + step * 1_009 + rank)
    tokens = torch.empty((batch, length), dtype=torch.int64)
    tokens[:, 0] = torch.randint(0, vocab, (batch,), generator=g)
    choice = torch.randint(0, 2, (batch, length), generator=g)
    for t in range(1, length):
        tokens[:, t] = nxt[tokens[:, t - 1], choice[:, t]]
    return tokens
