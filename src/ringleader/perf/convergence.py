"""The Optimus convergence model: how many more steps until the loss stops improving.

``l(k) = 1/(β0·k + β1) + β2`` with every ``β ≥ 0`` (SPEC A3; Optimus, EuroSys
2018). SGD's loss falls roughly as ``O(1/k)``; ``β2`` is the floor it tends to.
The model is refitted whenever new loss samples arrive; later samples carry more
weight because the early, noisy part of a loss curve says little about where it
ends.

A job is predicted to have converged once one more epoch would improve the loss
by less than ``threshold``. A flat or rising curve fits ``β0 = 0``: the
documented fallback is "no further improvement expected", i.e. zero remaining
steps, and the caller's own step limit decides.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import isfinite, sqrt

import numpy as np

from ringleader.perf.errors import ModelFitError
from ringleader.perf.nnls import nnls

MIN_SAMPLES = 3


@dataclass(frozen=True, slots=True)
class ConvergenceModel:
    """A fitted loss curve ``l(k) = 1/(β0·k + β1) + β2``."""

    beta: tuple[float, float, float]

    def loss(self, step: float) -> float:
        b0, b1, b2 = self.beta
        denominator = b0 * step + b1
        return float("inf") if denominator <= 0 else 1.0 / denominator + b2

    def converged_at(self, steps_per_epoch: float, threshold: float) -> float:
        """First step after which one epoch improves the loss by less than ``threshold``."""
        if steps_per_epoch <= 0 or threshold <= 0:
            raise ValueError("steps_per_epoch and threshold must be positive")
        b0, b1, _ = self.beta
        if b0 <= 0:
            return 0.0
        # Improvement over one epoch from step k is b0·S / (u·(u + b0·S)), u = b0·k + b1.
        span = b0 * steps_per_epoch
        u = (-span + sqrt(span * span + 4.0 * span / threshold)) / 2.0
        return max(0.0, (u - b1) / b0)

    def remaining_steps(self, step: float, steps_per_epoch: float, threshold: float) -> float:
        """Steps still to run from ``step`` until convergence (0 if already there)."""
        return max(0.0, self.converged_at(steps_per_epoch, threshold) - step)


def _linear_fit(
    k: np.ndarray, loss: np.ndarray, w: np.ndarray, floor: float
) -> tuple[np.ndarray, float]:
    """Best ``(β0, β1)`` for a fixed floor ``β2``, and its weighted loss-space error.

    With ``β2`` fixed, ``1/(l − β2) = β0·k + β1`` is linear: solve it by NNLS,
    then score the result on the loss itself.
    """
    gap = np.maximum(loss - floor, 1e-12)
    design = np.column_stack([k, np.ones_like(k)]) * (w * gap)[:, None]
    solution, _ = nnls(design, w * gap / gap)
    b0, b1 = float(solution[0]), max(float(solution[1]), 1e-12)
    predicted = 1.0 / (b0 * k + b1) + floor
    return np.array([b0, b1, floor]), float(np.sum((w * (predicted - loss)) ** 2))


def _initial_guess(k: np.ndarray, loss: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Profile the floor over a grid: the problem is linear once the floor is fixed."""
    lowest = float(loss.min())
    best, best_error = _linear_fit(k, loss, w, 0.0)
    for floor in np.linspace(0.0, lowest, 41)[1:-1]:
        candidate, error = _linear_fit(k, loss, w, float(floor))
        if error < best_error:
            best, best_error = candidate, error
    return best


def fit_convergence(
    steps: Sequence[float], losses: Sequence[float], *, recency_weight: float = 1.0
) -> ConvergenceModel:
    """Fit the loss curve to ``(step, loss)`` samples.

    ``recency_weight`` ≥ 0 makes later samples count more: sample ``i`` of
    ``n`` is weighted ``1 + recency_weight·i/(n-1)``. Raises ``ModelFitError``
    for fewer than three distinct steps, mismatched lengths, or non-finite or
    negative values.
    """
    if len(steps) != len(losses):
        raise ModelFitError(f"{len(steps)} steps but {len(losses)} losses: give one loss per step")
    pairs = sorted(zip(steps, losses, strict=True))
    for step, value in pairs:
        if not (isfinite(step) and step >= 0):
            raise ModelFitError(f"steps must be finite and non-negative, got {step!r}")
        if not (isfinite(value) and value >= 0):
            raise ModelFitError(f"losses must be finite and non-negative, got {value!r}")
    if len({k for k, _ in pairs}) < MIN_SAMPLES:
        raise ModelFitError(
            f"need loss samples at {MIN_SAMPLES} or more distinct steps to fit "
            f"l(k) = 1/(b0*k + b1) + b2, got {len({k for k, _ in pairs})}"
        )
    if recency_weight < 0:
        raise ModelFitError(f"recency_weight must be non-negative, got {recency_weight}")
    k = np.array([p[0] for p in pairs], dtype=float)
    loss = np.array([p[1] for p in pairs], dtype=float)
    n = len(k)
    w = 1.0 + recency_weight * np.arange(n) / (n - 1)
    k_scale = max(float(k.max()), 1.0)
    x0 = _initial_guess(k / k_scale, loss, w)

    def residual(beta: np.ndarray) -> np.ndarray:
        denominator = np.maximum(beta[0] * (k / k_scale) + beta[1], 1e-12)
        out: np.ndarray = w * (1.0 / denominator + beta[2] - loss)
        return out

    from scipy.optimize import least_squares  # here: see _linear_fit

    upper = [np.inf, np.inf, max(float(loss.min()), 1e-12)]
    x0 = np.clip(x0, 0.0, upper)
    result = least_squares(
        residual, x0, bounds=([0.0, 1e-12, 0.0], upper), xtol=1e-15, ftol=1e-15, gtol=1e-15
    )
    b0, b1, b2 = (float(v) for v in result.x)
    beta = (b0 / k_scale, b1, b2)
    if not all(isfinite(b) for b in beta):
        raise ModelFitError("the loss-curve fit did not converge to finite coefficients")
    return ConvergenceModel(beta=beta)
