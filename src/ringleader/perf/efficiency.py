"""Statistical efficiency from measured gradient statistics: what a larger batch is worth.

A step at global batch ``M`` is worth less than ``M/M0`` steps at the job's
smallest batch ``M0`` (SPEC E1). Pollux's profiles give, for each of a few
global batches, one row per epoch of a real run: the progress made so far (in
steps at ``M0``), the iterations, and the gradient's squared norm and variance
measured in that epoch. From them the gain of one step at ``M`` in epoch ``e``
is ``(var + sqr) / (var / r + sqr)`` with ``r = M / M0``, the statistics taken
between the two measured batches around ``M``; the job is done when its
progress reaches where the shortest of the runs stood after its last epoch.

Because the gain depends only on the batch and the epoch, the steps a job at a
fixed batch needs to finish are a sum over epochs (``steps_to_finish``), and its
time is that times its seconds per step: the simulator plays it at a constant
speed for a given placement (``sim.tabled``).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from ringleader.perf.profile_files import ProfileError, csv_rows, number


@dataclass(frozen=True)
class EpochRecord:
    """One validated run at one global batch: per epoch, progress and gradient statistics."""

    progress: np.ndarray
    """Progress (steps at the smallest batch) after each epoch, increasing."""
    grad_sqr: np.ndarray
    grad_var: np.ndarray


@dataclass(frozen=True)
class Efficiency:
    """Gradient statistics by global batch and epoch, and the progress a job must make."""

    runs: Mapping[int, EpochRecord]
    """By global batch, ascending."""
    epochs: int
    """Epochs to train: done once progress passes where every run stood after this many."""
    _finish: dict[int, float] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        shortest = min(len(r.progress) for r in self.runs.values())
        if not 1 <= self.epochs <= shortest:
            raise ProfileError(
                f"epochs {self.epochs} must be between 1 and {shortest}, the epochs of the "
                "shortest validation run"
            )

    @property
    def smallest_batch(self) -> int:
        """``M0``: the batch progress is counted in."""
        return min(self.runs)

    @property
    def largest_batch(self) -> int:
        return max(self.runs)

    @cached_property
    def _sizes(self) -> tuple[int, ...]:
        return tuple(self.runs)

    @cached_property
    def bounds(self) -> tuple[float, ...]:
        """Progress at the start of each epoch, and at the end of the last (``epochs + 1``)."""
        ends = (min(float(r.progress[e]) for r in self.runs.values()) for e in range(self.epochs))
        return (0.0, *ends)

    def stats(self, batch: float, epoch: int) -> tuple[float, float]:
        """(grad_sqr, grad_var) in ``epoch`` at global ``batch``, between measured batches."""
        sizes = self._sizes
        if not sizes[0] <= batch <= sizes[-1]:
            raise ProfileError(
                f"global batch {batch:g} is outside the validated batches {sizes[0]}-{sizes[-1]}"
            )
        i = bisect.bisect_left(sizes, batch)
        upper = sizes[i]
        lower = upper if upper == batch else sizes[i - 1]
        lo, hi = self.runs[lower], self.runs[upper]
        if lower == upper:
            return float(lo.grad_sqr[epoch]), float(lo.grad_var[epoch])
        w = (batch - lower) / (upper - lower)
        sqr = (1 - w) * lo.grad_sqr[epoch] + w * hi.grad_sqr[epoch]
        var = (1 - w) * lo.grad_var[epoch] + w * hi.grad_var[epoch]
        return float(sqr), float(var)

    def gain(self, batch: float, epoch: int) -> float:
        """Steps at ``M0`` that one step at ``batch`` is worth in ``epoch`` (SPEC E1)."""
        sqr, var = self.stats(batch, epoch)
        scale = batch / self.smallest_batch
        denominator = var / scale + sqr
        return (var + sqr) / denominator if denominator > 0 else 1.0

    def gains(self, batches: np.ndarray, epoch: int) -> np.ndarray:
        """``gain`` for many global batches (each within the validated ones) in ``epoch``."""
        sizes = np.asarray(self._sizes, dtype=float)
        sqr = np.interp(batches, sizes, [r.grad_sqr[epoch] for r in self.runs.values()])
        var = np.interp(batches, sizes, [r.grad_var[epoch] for r in self.runs.values()])
        scale = batches / self.smallest_batch
        denominator = var / scale + sqr
        safe = np.where(denominator > 0, denominator, 1.0)
        return np.where(denominator > 0, (var + sqr) / safe, 1.0)

    def steps_to_finish(self, batch: float) -> float:
        """Steps at a constant global ``batch`` from the start to done."""
        key = round(batch * 1000)
        found = self._finish.get(key)
        if found is None:
            bounds = self.bounds
            found = sum(
                (bounds[e + 1] - bounds[e]) / self.gain(batch, e) for e in range(self.epochs)
            )
            self._finish[key] = found
        return found


def read_efficiency(folder: Path, epochs: int | None) -> Efficiency:
    """The ``validation-<batch>.csv`` files of one application's profile, trained for
    ``epochs`` (None: every epoch of the shortest run).

    Raises ``ProfileError`` naming the file, the row and the field that is wrong.
    """
    runs: dict[int, EpochRecord] = {}
    for path in sorted(folder.glob("validation-*.csv")):
        suffix = path.stem.removeprefix("validation-")
        if not suffix.isdigit() or int(suffix) < 1:
            raise ProfileError(
                f"{path}: name the file validation-<global batch>.csv, e.g. validation-256.csv"
            )
        runs[int(suffix)] = _record(path)
    if not runs:
        raise ProfileError(
            f"{folder}: no validation-<global batch>.csv files (per-epoch progress and "
            "gradient statistics)"
        )
    if epochs is None:
        epochs = min(len(r.progress) for r in runs.values())
    return Efficiency(dict(sorted(runs.items())), epochs)


def _record(path: Path) -> EpochRecord:
    fields = ("progress", "grad_sqr", "grad_var")
    progress: list[float] = []
    sqr: list[float] = []
    var: list[float] = []
    for line, row in csv_rows(path, fields):
        p = number(path, line, row, "progress")
        if progress and p < progress[-1]:
            raise ProfileError(
                f"{path}:{line}: progress {p:g} is below the row before ({progress[-1]:g}); "
                "progress only grows"
            )
        if p < 0:
            raise ProfileError(f"{path}:{line}: progress {p:g} must not be negative")
        s = number(path, line, row, "grad_sqr")
        v = number(path, line, row, "grad_var")
        for name, value in (("grad_sqr", s), ("grad_var", v)):
            if value < 0:
                raise ProfileError(f"{path}:{line}: {name} {value:g} must not be negative")
        progress.append(p)
        sqr.append(s)
        var.append(v)
    if not progress:
        raise ProfileError(f"{path}: no epochs (a header and no rows)")
    return EpochRecord(np.asarray(progress), np.asarray(sqr), np.asarray(var))
