"""A replayed job whose batch adapted: the batch each launch is handed, and what it is worth.

A job that opts in takes, at every launch, the batch the scheduler hands it
(``spine.batching``), and keeps it until it is launched again; each step then
counts as the steps at ``global_min`` that its batch is worth by the gradient
statistics it had at that launch (the job library's ``worth``: AdaScale's
gain, fixed for the launch). So how fast such a job progresses is not its
worker count's but its launch's. The replay holds each of the three as the
real run had them:

* **Its step time at any size and share**: Pollux's overlap model
  (``perf.overlap``) fitted to what the job and its kin (the same model,
  ``spine.kin``) measured at each size and share they ran, on cores of
  their own.
* **Its gradient statistics as it trained**: what it reported, by how far it
  had got; the policy sees them as the runtime's does, and they set both the
  batch the simulator hands it and what that batch is worth.
* **The batch**: chosen at each simulated launch by the runtime's own rule,
  from what the simulated job has reported so far (``sim.playing.Handing``).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ringleader.fidelity.device import NONE, DeviceTime
from ringleader.job.batching import adascale_gain
from ringleader.perf.epochs import EpochsToConverge
from ringleader.perf.gradient import GradientReport
from ringleader.perf.overlap import OverlapSpeed
from ringleader.policy.model.views import JobShape
from ringleader.sim.profiles import TrueProfile
from ringleader.sim.tabled import PHASE_SLACK
from ringleader.spine.batching import BatchBounds

NO_BOUNDS = BatchBounds(1, 1, 1)
PHASES = 200
"""Stretches of training over which the replayed job's reported statistics stand: the
simulator looks at them again at each one's end (the server reads them every tick)."""


@dataclass(frozen=True)
class AdaptedProfile(TrueProfile):
    """A replayed job that takes the batch it is handed at each launch (see the module)."""

    timing: OverlapSpeed | None = field(default=None, compare=False, repr=False)
    """Its step time at any size and share (``perf.overlap``)."""
    reports: tuple[tuple[float, float, float], ...] = ()
    """``(fraction done, grad_sqr, grad_var)``, at most ``PHASES`` of them, in order."""
    bounds: BatchBounds = NO_BOUNDS
    device: DeviceTime = NONE
    """What its stand-in for a GPU's compute spends per step, which no core sharing slows."""
    worth: float = 1.0
    """Steps at ``global_min`` one of its steps counts as, since its latest launch."""

    @property
    def share(self) -> int:
        """Examples per GPU per step: its latest launch's (its shape's, as it reports it)."""
        return self.shape.batch_per_worker

    def report_at(self, done: float) -> tuple[float, float] | None:
        """``(grad_sqr, grad_var)`` as last reported ``done`` of the way through."""
        at = bisect.bisect_right(self.reports, (done, np.inf, np.inf)) - 1
        return None if at < 0 else self.reports[at][1:]

    def launched(self, gpus: int, per_gpu: int, accumulate: int, done: float) -> TrueProfile:
        share = per_gpu * accumulate
        worth, stats, low = 1.0, self.report_at(done), self.bounds.global_min
        if stats is not None:  # its variance is reported at global_min: tr Σ / low
            worth = adascale_gain(stats[0], stats[1] * low, share * gpus, low)
        shape = replace(self.shape, batch_per_worker=share)
        # A memo of whole-job seconds per count is the parent's batch's: not carried over.
        return replace(self, shape=shape, worth=worth, _finish={})

    def step_time_on(self, placement: tuple[int, ...], done: float = 0.0) -> float:
        assert self.timing is not None
        return self.timing.step_time(sum(placement), float(self.share))

    def host_speed(self, speed: float, placement: tuple[int, ...], done: float) -> float:
        return self.device.slowed(speed, self.step_time_on(placement, done), self.share)

    def seconds_on(self, placement: tuple[int, ...], done: float = 0.0) -> float:
        examples = self.epochs.at(sum(placement)) * self.shape.examples_per_epoch
        steps = examples / (self.worth * self.bounds.global_min)
        return steps * self.step_time_on(placement, done)

    def batch_on(self, placement: tuple[int, ...], done: float = 0.0) -> float:
        return float(self.share)

    def gradient_on(self, placement: tuple[int, ...], done: float) -> GradientReport | None:
        stats = self.report_at(done)
        if stats is None:
            return None
        b = self.bounds
        return GradientReport(stats[0], stats[1], b.global_min, b.global_max, b.per_gpu_max)

    def phase(self, done: float) -> int:
        """How many of its reports it had made ``done`` of the way through (a rounding
        short of one counts as at it: the engine stops the job there to look again)."""
        return bisect.bisect_right(self.reports, (done + PHASE_SLACK, np.inf, np.inf))

    def phase_end(self, done: float) -> float:
        at = self.phase(done)
        return self.reports[at][0] if at < len(self.reports) else 1.0


def adapted_profile(
    name: str,
    shape: JobShape,
    step_times: Mapping[int, float],
    total_epochs: float,
    timing: OverlapSpeed,
    reports: Sequence[tuple[float, float, float]],
    bounds: BatchBounds,
    device: DeviceTime = NONE,
) -> AdaptedProfile:
    """The replayed job: ``total_epochs`` at ``global_min``, timed by ``timing``, having
    reported ``reports`` (``(epoch, grad_sqr, grad_var)``), thinned to ``PHASES``
    stretches; ``step_times`` per count, for what reads a count's alone."""
    kept: list[tuple[float, float, float]] = []
    for epoch, sqr, var in reports:
        done = min(epoch / total_epochs, 1.0)
        if not kept or done >= kept[-1][0] + 1.0 / PHASES:
            kept.append((done, sqr, var))
    return AdaptedProfile(
        name,
        shape,
        step_times,
        EpochsToConverge.constant(total_epochs),
        placed=True,
        phased=True,
        timing=timing,
        reports=tuple(kept),
        bounds=bounds,
        device=device,
    )
