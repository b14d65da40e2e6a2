"""The resource → speed model: step time as a function of worker count, by NNLS.

``T(w) = θ0·m + θ1·a(w) + θ2·n·b(w) + θ3·n·c(w) + θ4`` with every ``θ ≥ 0``
(SPEC A2), where ``a, b, c`` are the allreduce coefficients of
``ringleader.perf.allreduce`` for ``w`` workers, ``m`` the per-worker batch and
``n`` the gradient size in bytes. So ``θ0`` is seconds per example, ``θ1`` the
per-message latency α, ``θ2`` seconds per byte sent (β), ``θ3`` seconds per
byte reduced (γ) and ``θ4`` the constant terms.

Why non-negative least squares: every term is a cost, and an unconstrained fit
to a handful of noisy samples happily returns a negative latency that predicts
faster steps with more workers.

Identifiability. With one per-worker batch size the compute term and the
constant are collinear, and for power-of-two worker counts (and the ring) the
transfer and reduce coefficients are proportional. Such samples still predict
well at the sampled sizes, but the split between collinear terms is not
determined by the data. We then pick the smallest (minimum-norm) non-negative
solution among the best fits, by adding a tiny ridge term, so the result is
deterministic and spreads cost over collinear terms instead of dropping all of
it on one. ``SpeedModel.rank`` records how many directions the samples pinned
down; the docs explain what that means for extrapolation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from math import isfinite
from typing import Any

import numpy as np

from ringleader.perf.allreduce import Algorithm, allreduce_cost
from ringleader.perf.errors import ModelFitError
from ringleader.perf.nnls import nnls

N_COEFFICIENTS = 5
_RIDGE = 1e-9


@dataclass(frozen=True, slots=True)
class StepSample:
    """One measurement: mean seconds per minibatch at ``workers`` workers."""

    workers: int
    step_time: float
    batch_per_worker: float


@dataclass(frozen=True, slots=True)
class SpeedModel:
    """A job's fitted step-time model and the speed (epochs/s) it implies."""

    theta: tuple[float, float, float, float, float]
    algorithm: Algorithm
    grad_bytes: float
    batch_per_worker: float
    examples_per_epoch: int
    rank: int = N_COEFFICIENTS
    global_batch: int | None = None
    """Strong scaling: the job keeps this global batch, so each of ``w`` workers takes
    ``global_batch / w`` (None: weak scaling, ``batch_per_worker`` each at every size)."""

    def batch_at(self, workers: int) -> float:
        """Each worker's batch at ``workers`` workers."""
        return self.batch_per_worker if self.global_batch is None else self.global_batch / workers

    def step_time(self, workers: int, batch_per_worker: float | None = None) -> float:
        """Predicted seconds per minibatch with ``workers`` workers."""
        m = self.batch_at(workers) if batch_per_worker is None else batch_per_worker
        cost = allreduce_cost(self.algorithm, workers)
        t0, t1, t2, t3, t4 = self.theta
        n = self.grad_bytes
        return t0 * m + t1 * cost.latency + (t2 * cost.transfer + t3 * cost.reduce) * n + t4

    def step_times(self, workers: int, per_worker: np.ndarray) -> np.ndarray:
        """``step_time(workers, m)`` for each ``m`` of ``per_worker``, in one array
        expression (the same operations in the same order: the same floats)."""
        cost = allreduce_cost(self.algorithm, workers)
        t0, t1, t2, t3, t4 = self.theta
        n = self.grad_bytes
        out: np.ndarray = t0 * per_worker + t1 * cost.latency
        out += (t2 * cost.transfer + t3 * cost.reduce) * n
        out += t4
        return out

    def epochs_per_second(self, workers: int) -> float:
        """``f(w) = B(w) / (N·T(w))``: the speed the allocator trades GPUs for, where the
        global batch ``B(w)`` is ``w·m`` (weak scaling) or fixed (strong scaling)."""
        examples = (
            workers * self.batch_per_worker if self.global_batch is None else self.global_batch
        )
        return examples / (self.examples_per_epoch * self.step_time(workers))

    @property
    def identifiable(self) -> bool:
        """Whether the samples pinned down every coefficient separately."""
        return self.rank == N_COEFFICIENTS


@dataclass(frozen=True, slots=True)
class MeasuredSpeed(SpeedModel):
    """A fitted model that answers with measured step times wherever they reach.

    At a measured worker count the step time is the measurement; between two
    measured counts it is interpolated linearly; only beyond them does the
    NNLS fit speak (e.g. a workload file measured at 1, 2 and 8 workers is
    taken as given at those sizes and between them). A fit to a handful of
    points can be far off at the points themselves (88% for some of Gavel's
    models), so a policy told a job's measurements should see them.
    """

    measured: tuple[tuple[int, float], ...] = ()
    """(workers, seconds per minibatch at ``batch_at(workers)``), sorted by workers."""

    def step_time(self, workers: int, batch_per_worker: float | None = None) -> float:
        if batch_per_worker is None or batch_per_worker == self.batch_at(workers):
            known = interpolate(self.measured, workers)
            if known is not None:
                return known
        return SpeedModel.step_time(self, workers, batch_per_worker)

    def step_times(self, workers: int, per_worker: np.ndarray) -> np.ndarray:
        out = SpeedModel.step_times(self, workers, per_worker)
        known = interpolate(self.measured, workers)
        if known is not None:
            out = np.where(per_worker == self.batch_at(workers), known, out)
        return out


def interpolate(points: Sequence[tuple[int, float]], workers: int) -> float | None:
    """The value at ``workers`` on the polyline through sorted ``points``; None outside."""
    if not points or not points[0][0] <= workers <= points[-1][0]:
        return None
    for (w0, t0), (w1, t1) in pairwise(points):
        if w0 <= workers <= w1:
            return t0 + (t1 - t0) * (workers - w0) / (w1 - w0)
    return points[0][1]  # a single point, at ``workers``


def job_fields(model: SpeedModel) -> dict[str, Any]:
    """The fields of ``model`` that every ``SpeedModel`` has: what a model of another
    kind for the same job (``MeasuredSpeed``, a goodput or an overlap model) starts from."""
    return {
        "theta": model.theta,
        "algorithm": model.algorithm,
        "grad_bytes": model.grad_bytes,
        "batch_per_worker": model.batch_per_worker,
        "examples_per_epoch": model.examples_per_epoch,
        "rank": model.rank,
        "global_batch": model.global_batch,
    }


def with_measurements(model: SpeedModel, measured: dict[int, float]) -> MeasuredSpeed:
    """``model``, answering with ``measured`` step times where they reach."""
    return MeasuredSpeed(**job_fields(model), measured=tuple(sorted(measured.items())))


def _features(samples: Sequence[StepSample], algorithm: Algorithm, grad_bytes: float) -> np.ndarray:
    rows = []
    for s in samples:
        cost = allreduce_cost(algorithm, s.workers)
        rows.append(
            [
                float(s.batch_per_worker),
                cost.latency,
                cost.transfer * grad_bytes,
                cost.reduce * grad_bytes,
                1.0,
            ]
        )
    return np.asarray(rows, dtype=float)


def _validate(samples: Sequence[StepSample], grad_bytes: float, examples_per_epoch: int) -> None:
    if not samples:
        raise ModelFitError("no step-time samples: run the job at two or more worker counts first")
    if not (isfinite(grad_bytes) and grad_bytes > 0):
        raise ModelFitError(f"grad_bytes must be a positive number of bytes, got {grad_bytes!r}")
    if examples_per_epoch <= 0:
        raise ModelFitError(f"examples_per_epoch must be positive, got {examples_per_epoch!r}")
    for i, s in enumerate(samples):
        if s.workers < 1:
            raise ModelFitError(f"sample {i}: workers must be at least 1, got {s.workers}")
        if s.batch_per_worker < 1:
            raise ModelFitError(
                f"sample {i}: batch_per_worker must be at least 1, got {s.batch_per_worker}"
            )
        if not (isfinite(s.step_time) and s.step_time > 0):
            raise ModelFitError(
                f"sample {i}: step_time must be a positive finite number of seconds, "
                f"got {s.step_time!r}"
            )
    configs = {(s.workers, s.batch_per_worker) for s in samples}
    if len({w for w, _ in configs}) < 2:
        raise ModelFitError(
            f"samples cover only {sorted(configs)}: the speed model needs measurements at "
            "two or more worker counts to separate computation from communication"
        )


def fit_speed_model(
    samples: Sequence[StepSample],
    *,
    algorithm: Algorithm = Algorithm.BINARY_BLOCKS,
    grad_bytes: float,
    examples_per_epoch: int,
    batch_per_worker: float | None = None,
    global_batch: int | None = None,
) -> SpeedModel:
    """Fit the non-negative step-time coefficients from measured samples.

    ``batch_per_worker`` is the batch the job will run with (default: that of
    the last sample); with ``global_batch`` the job keeps that global batch
    and each worker's batch shrinks as workers are added. Raises
    ``ModelFitError`` when the samples cannot support a model: none, bad
    values, a single worker count, or a fit that would predict a non-positive
    single-worker step time.
    """
    _validate(samples, grad_bytes, examples_per_epoch)
    a = _features(samples, algorithm, grad_bytes)
    y = np.asarray([s.step_time for s in samples], dtype=float)
    scale = np.abs(a).max(axis=0)
    scale[scale == 0] = 1.0
    scaled = a / scale
    rank = int(np.linalg.matrix_rank(scaled))
    if rank < N_COEFFICIENTS:
        # Minimum-norm choice among equally good fits (see module docstring).
        weight = np.sqrt(_RIDGE) * float(np.linalg.norm(scaled))
        scaled = np.vstack([scaled, weight * np.eye(N_COEFFICIENTS)])
        y = np.concatenate([y, np.zeros(N_COEFFICIENTS)])
    solution, _ = nnls(scaled, y)
    theta = solution / scale
    if not np.all(np.isfinite(theta)):
        raise ModelFitError("the NNLS fit did not converge to finite coefficients")
    m = batch_per_worker if batch_per_worker is not None else samples[-1].batch_per_worker
    model = SpeedModel(
        theta=(float(theta[0]), float(theta[1]), float(theta[2]), float(theta[3]), float(theta[4])),
        algorithm=algorithm,
        grad_bytes=grad_bytes,
        batch_per_worker=m,
        examples_per_epoch=examples_per_epoch,
        rank=rank,
        global_batch=global_batch,
    )
    if model.step_time(1) <= 0:
        raise ModelFitError(
            "the samples do not determine the single-worker step time (the fit put all of it "
            "into communication); add a sample at 1 worker"
        )
    return model
