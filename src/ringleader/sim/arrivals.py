"""Arrival processes for generated workloads."""

from __future__ import annotations

import numpy as np


def poisson_arrivals(count: int, mean_gap_s: float, seed: int, start_s: float = 0.0) -> list[float]:
    """``count`` submission times with exponential gaps of mean ``mean_gap_s``.

    The first job arrives one gap after ``start_s``. Same seed, same times.
    """
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    if mean_gap_s <= 0:
        raise ValueError(f"mean_gap_s must be positive, got {mean_gap_s}")
    gaps = np.random.default_rng(seed).exponential(mean_gap_s, size=count)
    return [float(t) for t in start_s + np.cumsum(gaps)]
