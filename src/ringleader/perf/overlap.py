"""Pollux's step-time model, fitted online: compute and sync that overlap, nodes apart.

A step of a data-parallel job computes its gradient, ``T_grad = α_c + β_c·m``
for ``m`` examples a GPU, and synchronises it, which costs nothing on one GPU,
``α_r + β_r·(k − 2)`` within a node and ``α_n + β_n·(k − 2)`` across nodes
(``k`` GPUs). The two overlap, as backward passes and allreduce buckets do, so
a step takes ``(T_grad^γ + T_sync^γ)^(1/γ)``: their sum at ``γ = 1``, the
slower of the two as ``γ`` grows (Pollux, OSDI'21 §3.2, ``fit_perf_params``).

Why this and not the count-only NNLS of ``perf.speed`` for a job that adapts
its batch: what one more GPU is worth to it is read at every batch it may
take, not at one, so the split of a step into a per-example and a constant
part, and of sync within and across nodes, decides where it grows. On
Pollux's workloads it took the default from 1.05-1.09x ``pollux``'s average
JCT to 0.97-1.02x (``docs/pollux.md``).

The fit minimises the squared log error of the step times the job reported,
by Levenberg-Marquardt with the derivatives worked out, under Pollux's priors: terms the
observations cannot tell are held (no multi-node step: cross-node sync at
least 1.1× the in-node one; one batch only: half the time a constant); the
rest may not go negative. Each observation is laid out on the fewest nodes of
``per_node`` GPUs, as the place stage lays a job out.

A GPU's share of a batch past what it holds at once (``per_gpu_max``) is
computed in micro-batches, and only the last one's gradient is synchronised:
a step is ``s·T_grad(micro) + (T_grad^γ + T_sync^γ)^(1/γ)`` with ``s`` the
micro-batches before the last, as AdaptDL times accumulation steps. Read as
one share in one pass, the constant part of ``T_grad`` would be paid once
where it is paid ``s + 1`` times, and a job's goodput on few GPUs at a large
batch told 1.2-1.3x too high.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from ringleader.perf.errors import ModelFitError
from ringleader.perf.speed import SpeedModel, job_fields

Params = tuple[float, float, float, float, float, float, float]
"""``(α_c, β_c, α_r, β_r, α_n, β_n, γ)``: seconds, seconds per example, then sync."""

_FLOOR = 1e-8
"""Pollux's lower bound for each term (a zero would make the log error's slope blow up)."""
_GAMMA = (1.0, 10.0)
_STEPS = 100
"""Levenberg-Marquardt steps at most a fit (most converge in far fewer)."""
_RIDGE = 1e-2
"""Weight of the six terms' squares (in seconds) beside the mean squared log error: a
handful of samples leaves directions the data do not pin down, and there the smaller
terms win. Chosen on Pollux's workloads at load 1.0 (1e-3 and 3e-2 did worse there;
``docs/pollux.md``)."""
_START: Params = (1e-2, 1e-3, 1e-2, 1e-3, 1e-2, 1e-3, 1.5)
"""Where the fit starts (Pollux's, but for ``γ``, which starts between sum and max)."""


@dataclass(frozen=True, slots=True)
class _Layout:
    """Steps of ``per_gpu`` examples a GPU, each on a count of GPUs laid out on the
    fewest nodes: which sync terms each step has, worked out once for every set of
    terms it is weighed at (a model's step times, a fit's many tries)."""

    per_gpu: np.ndarray
    """Examples a GPU computes at once (a micro-batch, where its share accumulates)."""
    within: np.ndarray
    """1 where the step synchronised within one node, else 0."""
    across: np.ndarray
    """1 where it synchronised across nodes, else 0."""
    extra: np.ndarray
    """GPUs past two (what the ``β`` terms are per)."""
    accumulated: np.ndarray
    """Micro-batches a step computes before the one whose gradient it synchronises."""

    @classmethod
    def of(
        cls, gpus: np.ndarray, share: np.ndarray, per_node: int, per_gpu_max: int | None
    ) -> _Layout:
        micro, accumulated = _micro_batches(share, per_gpu_max)
        within, across, extra = _sync_terms(gpus, per_node)
        return cls(micro, within, across, extra, accumulated)

    def powers(self, p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``T_grad``, ``T_sync``, and each raised to ``γ``."""
        grad_t = p[0] + p[1] * self.per_gpu
        sync = self.within * (p[2] + p[3] * self.extra) + self.across * (p[4] + p[5] * self.extra)
        gamma = p[6]
        return grad_t, sync, grad_t**gamma, sync**gamma

    def step_times(self, p: np.ndarray) -> np.ndarray:
        grad_t, _, a, b = self.powers(p)
        out: np.ndarray = self.accumulated * grad_t + (a + b) ** (1.0 / p[6])
        return out


def _micro_batches(share: np.ndarray, per_gpu_max: int | None) -> tuple[np.ndarray, np.ndarray]:
    """A GPU's ``share`` of a step as (micro-batch, micro-batches before the last), by
    the rule a launch splits it with (``perf.gradient.split_share``): the fewest of at
    most ``per_gpu_max`` examples. Each but the last computes only; the last also
    synchronises, overlapped (AdaptDL's accumulation steps)."""
    if per_gpu_max is None:
        return share, np.zeros_like(share)
    count = np.maximum(np.ceil(share / per_gpu_max - 1e-8), 1.0)
    return share / count, count - 1.0


def _sync_terms(gpus: np.ndarray, per_node: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``_Layout``'s ``within``, ``across`` and ``extra`` for steps on ``gpus`` GPUs."""
    nodes = np.ceil(gpus / per_node)
    within = ((gpus > 1) & (nodes == 1)).astype(np.float64)
    return within, (nodes > 1).astype(np.float64), np.maximum(gpus - 2.0, 0.0)


@dataclass(frozen=True, slots=True)
class OverlapSpeed(SpeedModel):
    """A ``SpeedModel`` whose step times are Pollux's overlap model's (``params``),
    each count laid out on the fewest nodes of ``per_node`` GPUs."""

    params: Params = _START
    per_node: int = 1
    per_gpu_max: int | None = None
    """The most examples one GPU computes at once (None: any share in one)."""
    anchors: tuple[tuple[int, float], ...] = ()
    """``(gpus, factor)``: at a count the job or its kin was measured on, the fit's step
    times scaled by the factor that makes it answer as measured (``anchored``)."""

    def step_time(self, workers: int, batch_per_worker: float | None = None) -> float:
        m = self.batch_at(workers) if batch_per_worker is None else batch_per_worker
        return float(self.step_times(workers, np.asarray([m], dtype=np.float64))[0])

    def step_times(self, workers: int, per_worker: np.ndarray) -> np.ndarray:
        return self.step_times_on(np.full(per_worker.shape, float(workers)), per_worker)

    def step_times_on(self, gpus: np.ndarray, per_worker: np.ndarray) -> np.ndarray:
        """Seconds per step of ``per_worker[i]`` examples a GPU on ``gpus[i]`` GPUs."""
        layout = _Layout.of(gpus, per_worker, self.per_node, self.per_gpu_max)
        times = layout.step_times(np.asarray(self.params))
        for count, factor in self.anchors:
            times = np.where(gpus == count, times * factor, times)
        return times


@dataclass(frozen=True, slots=True)
class _Samples(_Layout):
    """A fit's samples: their layout, and the log of each step time."""

    log_t: np.ndarray

    @classmethod
    def measured(
        cls,
        gpus: np.ndarray,
        share: np.ndarray,
        seconds: np.ndarray,
        per_node: int,
        per_gpu_max: int | None,
    ) -> _Samples:
        layout = _Layout.of(gpus, share, per_node, per_gpu_max)
        return cls(
            layout.per_gpu,
            layout.within,
            layout.across,
            layout.extra,
            layout.accumulated,
            np.log(seconds),
        )

    def residuals(self, p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Each sample's log error, and what its derivatives are made of."""
        grad_t, sync, a, b = self.powers(p)
        total = a + b
        overlapped = total ** (1.0 / p[6])
        step = self.accumulated * grad_t + overlapped
        parts = np.stack([a, b, total, overlapped, step])
        return np.log(step) - self.log_t, grad_t, sync, parts

    def jacobian(
        self, p: np.ndarray, grad_t: np.ndarray, sync: np.ndarray, parts: np.ndarray
    ) -> np.ndarray:
        """Each sample's log error's derivative in each term (a row per sample)."""
        a, b, total, overlapped, step = parts
        gamma = p[6]
        # The overlapped part's slope in T_grad and T_sync is its share of the sum
        # over itself; the accumulated micro-batches add T_grad once each.
        share = overlapped / step
        d_grad = share * a / (total * grad_t) + self.accumulated / step
        synced = sync > 0
        safe_sync = np.where(synced, sync, 1.0)
        d_sync = np.where(synced, share * b / (total * safe_sync), 0.0)
        log_sync = np.where(synced, np.log(safe_sync), 0.0)
        d_gamma = share * (
            -np.log(total) / gamma**2 + (a * np.log(grad_t) + b * log_sync) / (gamma * total)
        )
        out = np.empty((len(d_grad), 7))
        out[:, 0] = d_grad
        out[:, 1] = d_grad * self.per_gpu
        out[:, 2] = d_sync * self.within
        out[:, 3] = out[:, 2] * self.extra
        out[:, 4] = d_sync * self.across
        out[:, 5] = out[:, 4] * self.extra
        out[:, 6] = d_gamma
        return out


def _cost(r: np.ndarray, p: np.ndarray) -> float:
    """The mean squared log error, plus the ridge on the six terms."""
    return float(r @ r) / len(r) + _RIDGE * float(p[:6] @ p[:6])


def _solve(start: np.ndarray, low: np.ndarray, high: np.ndarray, samples: _Samples) -> np.ndarray:
    """Levenberg-Marquardt on the free terms, each step clipped into the bounds.

    Seven terms and a handful of samples: a 7x7 solve a step, where a general
    bounded optimiser (scipy's L-BFGS-B) took 25-60 ms a fit here, most of it in
    its own bookkeeping, and its import 0.3 s."""
    free = low < high
    lo, hi = low[free], high[free]
    p: np.ndarray = np.clip(start, low, high)
    ridge = np.where(np.arange(7) < 6, _RIDGE, 0.0)[free]
    r, *parts = samples.residuals(p)
    jacobian = samples.jacobian(p, *parts)[:, free]
    cost = _cost(r, p)
    damping = 1e-3
    n = len(r)
    for _ in range(_STEPS):
        gradient = jacobian.T @ r / n + ridge * p[free]
        # A term at a bound that the slope pushes past it sits out this step (projected
        # Newton): clipping its share of a step would leave only creeping steps.
        at = p[free]
        moving = ~(((at <= lo) & (gradient > 0)) | ((at >= hi) & (gradient < 0)))
        if not moving.any():
            break
        j = jacobian[:, moving]
        hessian = j.T @ j / n + np.diag(ridge[moving])
        scaled = hessian + damping * np.diag(np.diag(hessian) + 1e-12)
        try:
            step = np.linalg.solve(scaled, -gradient[moving])
        except np.linalg.LinAlgError:
            damping *= 10
            continue
        trial: np.ndarray = p.copy()
        moved = at.copy()
        moved[moving] += step
        trial[free] = np.clip(moved, lo, hi)
        r_new, *parts_new = samples.residuals(trial)
        new_cost = _cost(r_new, trial) if np.all(np.isfinite(r_new)) else math.inf
        if new_cost < cost:
            done = cost - new_cost <= 1e-6 * cost + 1e-12
            p, r, cost = trial, r_new, new_cost
            if done:
                break
            jacobian = samples.jacobian(p, *parts_new)[:, free]
            damping = max(damping / 3, 1e-9)
        else:
            damping *= 4
            if damping > 1e8:
                break
    return p


def _bounds(samples: _Samples, seconds: np.ndarray) -> tuple[list[float], list[float], list[float]]:
    """Start, lower and upper bounds, with Pollux's priors: a term the observations
    cannot tell is held at a value (a bound equal on both sides)."""
    start, low = list(_START), [_FLOOR] * 6 + [_GAMMA[0]]
    high = [math.inf] * 6 + [_GAMMA[1]]

    def hold(i: int, value: float) -> None:
        start[i] = low[i] = high[i] = value

    if len(np.unique(samples.per_gpu)) == 1:
        # One batch: the constant and the per-example part are one number; half each.
        hold(0, float(np.mean(seconds / (samples.accumulated + 1))) / 2)
    if not samples.across.any():
        hold(4, _FLOOR)
        hold(5, _FLOOR)
    if not samples.within.any():
        hold(2, _FLOOR)
        hold(3, _FLOOR)
    if not samples.extra.any():
        hold(3, _FLOOR)
        hold(5, _FLOOR)
    return start, low, high


def fit_overlap(
    samples: Sequence[tuple[int, float, float]], per_node: int, per_gpu_max: int | None = None
) -> Params:
    """Pollux's terms fitted to ``(gpus, seconds per step, examples per GPU)`` samples
    (see the module docstring), each GPU's examples taken in micro-batches of at most
    ``per_gpu_max`` (None: at once). Raises ``ModelFitError`` for no sample or a bad
    one."""
    if per_node < 1:
        raise ModelFitError(f"per_node must be at least 1, got {per_node}")
    if not samples:
        raise ModelFitError("no step-time samples to fit")
    for gpus, seconds, per_gpu in samples:
        if gpus < 1 or not (math.isfinite(seconds) and seconds > 0) or not per_gpu > 0:
            raise ModelFitError(f"a step-time sample is not usable: {(gpus, seconds, per_gpu)}")
    if per_gpu_max is not None and per_gpu_max < 1:
        raise ModelFitError(f"per_gpu_max must be at least 1, got {per_gpu_max}")
    points = tuple((float(g), float(s), float(m)) for g, s, m in samples)
    return _fit(points, per_node, per_gpu_max)


@lru_cache(maxsize=16384)
def _fit(
    points: tuple[tuple[float, float, float], ...], per_node: int, per_gpu_max: int | None
) -> Params:
    gpus = np.asarray([s[0] for s in points])
    seconds = np.asarray([s[1] for s in points])
    per_gpu = np.asarray([s[2] for s in points])
    samples = _Samples.measured(gpus, per_gpu, seconds, per_node, per_gpu_max)
    start, low, high = _bounds(samples, seconds)
    found = _solve(np.asarray(start), np.asarray(low), np.asarray(high), samples)
    p = [float(v) for v in found]
    if not samples.across.any():
        # Pollux's prior: crossing a node costs at least what syncing within one does.
        p[4], p[5] = max(p[4], p[2] * 1.1), max(p[5], p[3] * 1.1)
    if not all(math.isfinite(v) for v in p):
        raise ModelFitError("the overlap fit did not converge to finite terms")
    return (p[0], p[1], p[2], p[3], p[4], p[5], p[6])


def overlap_model(
    model: SpeedModel, params: Params, per_node: int, per_gpu_max: int | None = None
) -> OverlapSpeed:
    """``model``'s job (its shape, batch, epochs) with ``params``' step times."""
    return OverlapSpeed(
        **job_fields(model), params=params, per_node=per_node, per_gpu_max=per_gpu_max
    )


ANCHOR_LIMIT = 2.0
"""The most an anchor scales the fit by, either way: a step time measured while the job
restarted or shared its node is not a reason to believe the count is twice as slow."""


@lru_cache(maxsize=16384)
def anchored(model: OverlapSpeed, samples: tuple[tuple[int, float, float], ...]) -> OverlapSpeed:
    """``model``, answering at each count of ``samples`` (``(gpus, seconds per step,
    examples per GPU)``) as was measured there, at every batch in proportion.

    Pollux's measured tables are not smooth (yolov3 on one GPU: 0.45 s at 6 examples,
    0.33 s at 8), so a fit of seven terms misses some counts it was fitted at by 20-30%
    (bert and yolov3 at 8 GPUs), and the allocation believed the fit over the
    measurement. The fit still tells every count not measured."""
    gpus = np.asarray([float(g) for g, _, _ in samples])
    told = model.step_times_on(gpus, np.asarray([float(m) for _, _, m in samples]))
    anchors = []
    for (count, seconds, _), fitted in zip(samples, told.tolist(), strict=True):
        if fitted > 0 and math.isfinite(fitted) and seconds > 0:
            factor = min(max(seconds / fitted, 1.0 / ANCHOR_LIMIT), ANCHOR_LIMIT)
            anchors.append((count, factor))
    return replace(model, anchors=tuple(anchors))
