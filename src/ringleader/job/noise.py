"""The gradient noise scale, measured while a job trains (SPEC E1; AdaptDL's estimator).

Two gradients of one step at different batches, a small one of ``b``
examples and a large one of ``B``, are enough to estimate both halves of
the noise scale without an extra backward pass (McCandlish et al. 2018,
appendix A.1): with ``|g_b|²`` and ``|g_B|²`` their squared norms,

* ``|G|² ≈ (B·|g_B|² − b·|g_b|²) / (B − b)``, the true gradient's squared norm;
* ``tr Σ ≈ (|g_b|² − |g_B|²) / (1/b − 1/B)``, the per-example variance.

Under DDP the small gradient is a replica's own, before the allreduce, and
the large one the averaged gradient after it (``DistributedNoise``, a comm
hook: nothing more is sent). With one replica there is one gradient per
step, so two successive steps stand for two replicas (``LoneNoise``): that
holds while one step moves the weights little, which is what a learning
rate is tuned for. Each step's estimates are noisy, and either may be
negative; exponential moving averages with bias correction smooth them
(``NoiseScale``), as AdaptDL does: a step weighs as many steps at the batch
the learning rate was tuned at as its examples make (AdaptDL's
``0.999 ** scale``), and an average below zero reads as zero (``|G|²``: the
noise swamps the gradient, so a larger batch loses nothing) or as a tiny
variance.

A step that accumulates micro-batches (``job.accumulate``) is one gradient
over all of them: ``b`` is then a replica's examples over the whole step, and
``B`` all replicas'.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

SMOOTHING = 0.999
"""Weight of the past in each moving average per step at ``NoiseScale.unit`` examples:
about the last thousand such steps count. A hundred (0.99) left a noisy classifier's
``|G|²`` swinging from -0.018 to 0.041 about a mean of 0.004 within one epoch, and the
batch it was handed with it."""
SETTLED_STEPS = 30
"""Steps at ``NoiseScale.unit`` the averages hold before they are reported (``settled``):
a classifier's first estimate said ``|G|²`` was below zero, read as a noise scale without
bound, and the policy gave it three GPUs and a batch of 2,046 for its second second."""
LEAST_VAR = 1e-12
"""The least ``tr Σ`` read (AdaptDL's floor): a gain is a ratio over it."""


@dataclass(slots=True)
class NoiseScale:
    """Moving averages of ``|G|²`` and ``tr Σ`` over the steps seen, bias-corrected."""

    smoothing: float = SMOOTHING
    unit: float = 0.0
    """Examples of a step that counts as one in the averages (the batch the learning
    rate was tuned at); 0: every step counts as one. Not checkpointed: set at start."""
    sqr_sum: float = 0.0
    var_sum: float = 0.0
    weight: float = 0.0
    """``1 − smoothing^n`` after ``n`` steps: what the sums are divided by."""

    def observe(self, small_sqr: float, big_sqr: float, small: int, big: int) -> None:
        """Fold one step: ``|g|²`` of a gradient over ``small`` examples and over ``big``."""
        if not big > small > 0 or not (math.isfinite(small_sqr) and math.isfinite(big_sqr)):
            return  # a step with one batch size, or an overflow, says nothing
        sqr = (big * big_sqr - small * small_sqr) / (big - small)
        var = (small_sqr - big_sqr) / (1.0 / small - 1.0 / big)
        keep = self.smoothing ** (big / self.unit) if self.unit > 0 else self.smoothing
        self.sqr_sum = keep * self.sqr_sum + (1 - keep) * sqr
        self.var_sum = keep * self.var_sum + (1 - keep) * var
        self.weight = keep * self.weight + (1 - keep)

    @property
    def settled(self) -> bool:
        """Whether the averages hold ``SETTLED_STEPS`` steps' worth: worth reporting."""
        return self.weight >= 1.0 - self.smoothing**SETTLED_STEPS

    @property
    def grad_sqr(self) -> float | None:
        """``|G|²`` (at least 0), or None before the first step."""
        return max(self.sqr_sum / self.weight, 0.0) if self.weight > 0 else None

    @property
    def trace_var(self) -> float | None:
        """``tr Σ``, the variance of one example's gradient summed over parameters (at
        least ``LEAST_VAR``)."""
        return max(self.var_sum / self.weight, LEAST_VAR) if self.weight > 0 else None

    @property
    def noise_scale(self) -> float | None:
        """``B_simple = tr Σ / |G|²``: the batch past which a larger one helps little
        (None before the first step; infinite while ``|G|²`` reads 0)."""
        sqr, var = self.grad_sqr, self.trace_var
        if sqr is None or var is None:
            return None
        return var / sqr if sqr > 0 else math.inf

    def state_dict(self) -> dict[str, float]:
        return {"sqr_sum": self.sqr_sum, "var_sum": self.var_sum, "weight": self.weight}

    def load_state_dict(self, state: dict[str, float]) -> None:
        self.sqr_sum = float(state.get("sqr_sum", 0.0))
        self.var_sum = float(state.get("var_sum", 0.0))
        self.weight = float(state.get("weight", 0.0))


def _squared_norm(tensors: Any) -> float:
    import torch

    total = torch.zeros((), dtype=torch.float64)
    for t in tensors:
        if t is not None:
            total += t.detach().double().pow(2).sum().cpu()
    return float(total)


class LoneNoise:
    """One replica: each two successive steps' gradients stand for two replicas.

    An optimizer step pre-hook reads the whole gradient just before it is
    applied; every second step folds the pair into ``scale``.
    """

    def __init__(self, optimizer: Any, scale: NoiseScale) -> None:
        self.scale = scale
        self.batch = 0
        """Examples in the step under way (the loader sets it)."""
        self._last: list[Any] | None = None
        self._last_batch = 0
        self._handle = optimizer.register_step_pre_hook(self._before_step)

    def _before_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        grads = [p.grad for group in optimizer.param_groups for p in group["params"]]
        grads = [g.detach().clone() for g in grads if g is not None]
        if self._last is None or self._last_batch != self.batch or not self.batch:
            self._last, self._last_batch = grads, self.batch
            return
        small = 0.5 * (_squared_norm(grads) + _squared_norm(self._last))
        big = _squared_norm(0.5 * (a + b) for a, b in zip(grads, self._last, strict=True))
        self.scale.observe(small, big, self.batch, 2 * self.batch)
        self._last = None

    def remove(self) -> None:
        self._handle.remove()


class DistributedNoise:
    """Several replicas: a DDP comm hook that squares each bucket before and after its
    allreduce (this replica's gradient, then the average of all of them)."""

    def __init__(self, ddp_model: Any, world: int, scale: NoiseScale) -> None:
        import torch

        self.scale, self.world = scale, world
        self.batch = 0
        """Examples this replica took in the step under way (the loader sets it)."""
        self.accumulate = 1
        """Micro-batches summed into the gradient the hook sees (the loader sets it)."""
        self._small = torch.zeros((), dtype=torch.float64)
        self._big = torch.zeros((), dtype=torch.float64)

        def hook(state, bucket):  # type: ignore[no-untyped-def]
            # Unannotated: DDP rejects a hook whose annotations are not its own types,
            # and under ``from __future__ import annotations`` every one is a string.
            return self._reduce(bucket)

        ddp_model.register_comm_hook(None, hook)

    def _reduce(self, bucket: Any) -> Any:
        import torch.distributed as dist

        tensor = bucket.buffer()
        self._small = self._small + tensor.detach().double().pow(2).sum().cpu()
        tensor.div_(self.world)
        future = dist.all_reduce(tensor, async_op=True).get_future()

        def averaged(done: Any) -> Any:
            out = done.value()[0]
            self._big = self._big + out.detach().double().pow(2).sum().cpu()
            return out

        return future.then(averaged)

    def step_done(self) -> None:
        """Fold the step just finished (its buckets all reduced) and start the next."""
        import torch

        # Under accumulation the hook squared the sum of the micro-batches' gradients,
        # each a mean over its own: the step's mean gradient is that sum / accumulate.
        summed = float(self.accumulate) ** 2
        small, big = float(self._small) / summed, float(self._big) / summed
        self._small = torch.zeros((), dtype=torch.float64)
        self._big = torch.zeros((), dtype=torch.float64)
        if self.batch and big > 0:
            self.scale.observe(small, big, self.batch, self.batch * self.world)
