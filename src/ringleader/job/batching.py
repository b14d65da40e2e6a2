"""The batch a job that adapts it was launched with, and what its gradient says of it.

A spec's ``batch`` (``global_min``, ``global_max``, ``per_gpu_max``) opts a
job in; at every launch the scheduler picks how many examples each GPU
takes (``perf.gradient.best_batch``) and passes it, with the bounds, in
``RINGLEADER_BATCH``. The job library reads it here: ``elastic.DataLoader``
takes that many per rank, and the learning-rate rules scale by the batch
over the one the rate was tuned at rather than by the world size.

Where one GPU cannot hold its share at once, the launch splits it into
``accumulate`` micro-batches of ``per_gpu`` (at most ``per_gpu_max``) whose
gradients add up before one optimizer step (``job.accumulate``): one step
then takes ``per_gpu × world × accumulate`` examples. A variable written
before accumulation existed has no ``accumulate`` and reads as 1.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from ringleader.job.noise import NoiseScale

BATCH_ENV = "RINGLEADER_BATCH"


@dataclass(frozen=True, slots=True)
class LaunchBatch:
    """The bounds a spec set, and the share of the batch each GPU takes this launch."""

    global_min: int
    global_max: int
    per_gpu_max: int
    per_gpu: int
    """Examples one GPU takes per micro-batch (per step, where ``accumulate`` is 1)."""
    accumulate: int = 1
    """Micro-batches per optimizer step, their gradients summed between."""

    def __post_init__(self) -> None:
        if not 1 <= self.global_min <= self.global_max:
            raise ValueError(
                f"{BATCH_ENV}: need 1 <= global_min <= global_max, got "
                f"{self.global_min} and {self.global_max}"
            )
        if not 1 <= self.per_gpu <= self.per_gpu_max:
            raise ValueError(
                f"{BATCH_ENV}: per_gpu {self.per_gpu} is outside 1..per_gpu_max {self.per_gpu_max}"
            )
        if self.accumulate < 1:
            raise ValueError(f"{BATCH_ENV}: accumulate must be at least 1, got {self.accumulate}")

    @property
    def share(self) -> int:
        """Examples one GPU takes per optimizer step, over all its micro-batches."""
        return self.per_gpu * self.accumulate

    def global_batch(self, world: int) -> int:
        """Examples one optimizer step takes over ``world`` GPUs."""
        return self.share * world

    def to_env(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> LaunchBatch | None:
        """The launch's batch, or None where the job keeps the batch its script sets."""
        text = (os.environ if env is None else env).get(BATCH_ENV)
        if not text:
            return None
        try:
            fields = json.loads(text)
            return cls(
                **{k: int(fields[k]) for k in cls.__slots__ if k != "accumulate"},
                accumulate=int(fields.get("accumulate", 1)),
            )
        except (ValueError, TypeError, KeyError, AttributeError) as err:
            raise ValueError(f"{BATCH_ENV} is not a batch the scheduler wrote: {err}") from None


def gain(scale: NoiseScale, batch: float, tuned_at: float) -> float:
    """AdaScale's gain: how many steps at ``tuned_at`` examples one step at ``batch`` is
    worth by the gradient statistics so far (1 before there are any)."""
    return adascale_gain(scale.grad_sqr, scale.trace_var, batch, tuned_at)


def adascale_gain(
    grad_sqr: float | None, trace_var: float | None, batch: float, tuned_at: float
) -> float:
    """``gain`` from ``|G|²`` and ``tr Σ`` (each as ``NoiseScale`` reads it): where
    ``|G|²`` is 0 the noise swamps the gradient, and a step is worth its batch over
    ``tuned_at`` (AdaptDL's reading, and the policy's: ``perf.gradient``)."""
    if grad_sqr is None or trace_var is None or trace_var <= 0 or batch <= tuned_at:
        return 1.0
    sqr = max(grad_sqr, 0.0)
    small, big = trace_var / tuned_at, trace_var / batch  # the gradient's variance at each
    return (small + sqr) / (big + sqr)


def gradient_fields(
    noise: NoiseScale, per_step: int, launched: LaunchBatch | None
) -> dict[str, float]:
    """What a step's progress record says of the gradient and the batch bounds (nothing
    before the averages settle, ``NoiseScale.settled``): the variance at the batch the
    rate was tuned at, ``global_min`` where the batch adapts, else this step's."""
    sqr, var = noise.grad_sqr, noise.trace_var
    if sqr is None or var is None or not noise.settled:
        return {}
    tuned = launched.global_min if launched is not None else per_step
    record = {"grad_sqr": sqr, "grad_var": var / tuned, "batch_min": float(tuned)}
    if launched is not None:
        record |= {"batch_max": launched.global_max, "per_gpu_max": launched.per_gpu_max}
    return record
