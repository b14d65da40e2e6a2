"""Epochs to converge as a function of worker count.

With the per-worker batch fixed, more workers mean a larger global batch, and a
larger batch usually needs more epochs to reach the same accuracy (SPEC A7: the
ResNet-110 job needs about 146 epochs on 1 GPU and 220 on 8). The allocator must
weigh that against the faster epochs, so remaining work is expressed per worker
count.

Between and beyond the measured counts we interpolate linearly in ``log2(w)``
and extrapolate the last segment's slope, never below the smallest measured
value: a documented assumption, not a law.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from math import isfinite, log2


@dataclass(frozen=True, slots=True)
class EpochsToConverge:
    """Measured epochs-to-converge at some worker counts; see the module docstring."""

    points: tuple[tuple[int, float], ...]

    def __post_init__(self) -> None:
        if not self.points:
            raise ValueError("epochs-to-converge needs at least one (workers, epochs) point")
        seen: set[int] = set()
        for workers, epochs in self.points:
            if workers < 1 or workers in seen:
                raise ValueError(f"worker counts must be distinct and >= 1, got {workers}")
            if not (isfinite(epochs) and epochs > 0):
                raise ValueError(f"epochs must be positive, got {epochs} at {workers} workers")
            seen.add(workers)
        object.__setattr__(self, "points", tuple(sorted(self.points)))

    @classmethod
    def constant(cls, epochs: float) -> EpochsToConverge:
        """The same epoch count at every size (what a loss-curve model alone knows)."""
        return cls(((1, epochs),))

    @classmethod
    def from_mapping(cls, table: Mapping[int, float]) -> EpochsToConverge:
        return cls(tuple(table.items()))

    def scaled(self, factor: float) -> EpochsToConverge:
        """The same curve for a job that needs ``factor`` times as much training."""
        return EpochsToConverge(tuple((w, e * factor) for w, e in self.points))

    def at(self, workers: int) -> float:
        pts = self.points
        if len(pts) == 1:
            return pts[0][1]
        x = log2(workers)
        if workers <= pts[0][0]:
            left, right = pts[0], pts[1]
        elif workers >= pts[-1][0]:
            left, right = pts[-2], pts[-1]
        else:
            i = next(i for i, (w, _) in enumerate(pts) if w >= workers)
            left, right = pts[i - 1], pts[i]
        x0, x1 = log2(left[0]), log2(right[0])
        value = left[1] + (right[1] - left[1]) * (x - x0) / (x1 - x0)
        return max(value, min(e for _, e in pts))
