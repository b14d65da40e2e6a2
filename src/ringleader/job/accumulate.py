"""Gradient accumulation a ported script does not see: micro-batches, one optimizer step.

Where a launch's share of the batch is more than one GPU holds, each optimizer
step takes ``accumulate`` micro-batches (``RINGLEADER_BATCH``, ``job.batching``).
A ported script still does, for every batch its loader yields,
``optimizer.zero_grad(); loss.backward(); optimizer.step()``, so the
accumulation has to happen around those calls:

* ``elastic.DataLoader`` yields micro-batches and says which one ends a step
  (``micro_batch``). Under DDP the ones before it run inside
  ``model.no_sync()``, as AdaptDL's do: each rank sums their gradients, and
  the last backward allreduces the sum once.
* The optimizer's ``step()`` is held until that last micro-batch; then it
  divides the summed gradient by ``accumulate`` and steps: each micro-batch's
  loss is a mean over its own examples, so the step sees the mean over all of
  them, as one step of the whole batch would.
* ``zero_grad()`` between a held step and the real one does nothing (it would
  drop what was summed), so a script that zeroes before its backward and one
  that zeroes after its step both accumulate. Only the optimizer's is held:
  a script that zeroes by ``model.zero_grad()`` drops the sum (patching the
  model too would stop ``torch.save(model)`` from pickling it).

Why patch the optimizer the script made, on that instance: ``elastic.prepare``
is handed it but returns only the model, and the script goes on calling its
own optimizer. Returning a wrapper would change a line of every script, and
the model's backward cannot hold back a step. Nothing is patched where
``accumulate`` is 1, so a job that never accumulates runs exactly as before.

What the noise estimators see: ``LoneNoise``'s step pre-hook runs inside the
real step, after the division, over the whole step's gradient;
``DistributedNoise``'s comm hook runs only in the last backward, over the sum,
and divides its squares by ``accumulate²`` (``job.noise``).
"""

from __future__ import annotations

import contextlib
import math
import types
from collections.abc import Iterator, Sequence
from typing import Any

_LR_SCHEDULER_MARK = "_wrapped_by_lr_sched"
"""What torch's LR schedulers set on a step they wrapped, and look for to warn when a
later patch hid theirs: kept on ours so that one made before ``prepare`` stays quiet."""


class Accumulation:
    """Holds ``optimizer``'s step until the last of ``count`` micro-batches (``count > 1``)."""

    def __init__(self, optimizer: Any, model: Any, count: int) -> None:
        if count < 2:
            raise ValueError(f"accumulate needs at least 2 micro-batches a step, got {count}")
        self.count, self.model = count, model
        self.final = True
        """Whether the micro-batch under way ends the step (outside the loader: always)."""
        self.held = False
        """Whether a step was held since the last real one: gradients are summing."""
        self._optimizer = optimizer
        self._step, self._zero_grad = optimizer.step, optimizer.zero_grad
        optimizer.step = types.MethodType(self._patched_step(), optimizer)
        optimizer.zero_grad = types.MethodType(_zero_grad_unless(self), optimizer)

    @contextlib.contextmanager
    def micro_batch(self, index: int) -> Iterator[None]:
        """The ``index``-th micro-batch of a step (from 0) is under way: the last one steps
        and synchronises; every other one is held, and kept off the network under DDP."""
        self.final = index == self.count - 1
        try:
            if self.final or not hasattr(self.model, "no_sync"):
                yield
            else:
                with self.model.no_sync():
                    yield
        finally:
            self.final = True

    def _patched_step(self) -> Any:
        accumulation = self

        def step(optimizer: Any, closure: Any = None) -> Any:
            if closure is not None:
                raise ValueError(
                    "optimizer.step(closure) cannot accumulate micro-batches: step without "
                    "a closure, or raise the spec's batch.per_gpu_max so a share fits at once"
                )
            if not accumulation.final:
                accumulation.held = True
                return None
            accumulation.held = False
            accumulation.average()
            return accumulation._step()

        if hasattr(self._step, _LR_SCHEDULER_MARK):
            setattr(step, _LR_SCHEDULER_MARK, True)
        return step

    def average(self) -> None:
        """The summed gradient over ``count`` micro-batches, as their mean."""
        import torch

        with torch.no_grad():
            for group in self._optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        p.grad.div_(self.count)


def _zero_grad_unless(accumulation: Accumulation) -> Any:
    def zero_grad(optimizer: Any, *args: Any, **kwargs: Any) -> None:
        if not accumulation.held:
            accumulation._zero_grad(*args, **kwargs)

    return zero_grad


def micro_batch(
    accumulation: Accumulation | None, index: int
) -> contextlib.AbstractContextManager[None]:
    """The ``index``-th micro-batch of a step is under way (always 0 without accumulation)."""
    return contextlib.nullcontext() if accumulation is None else accumulation.micro_batch(index)


def mean_loss(said: Sequence[Any]) -> float | None:
    """The loss of a step from what the script said for each of its micro-batches (None
    where it said none, or one is not finite: no number to chart; a weight gone bad is
    caught by the divergence watch)."""
    values = [float(v) for v in said if v is not None]
    if not values or not all(math.isfinite(v) for v in values):
        return None
    return sum(values) / len(values)
