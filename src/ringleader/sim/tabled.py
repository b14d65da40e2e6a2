"""Ground truth from a measured table: a job that keeps its global batch, played as measured.

``tabled_profile`` turns a ``MeasuredJob`` (``perf.measured``) and the global
batch a job keeps into the simulator's ``TrueProfile``. The job's speed is read
from the table for the placement it holds (GPUs per node), with the steps it
needs at the batch its GPUs make of the global one: as the measurement says,
not as a fitted curve says. What a policy is told, where it may know the truth
(``Needs.true_model``), is the same table at the most compact placement of each
size, nodes filled first, the way its placer would lay the job out.

A job that changes size keeps the fraction of its work done; where the new
split rounds the global batch differently (6 GPUs make 2,052 of 2,048), that
fraction is read in the new batch's steps: the one approximation of this
module, under 0.3% of any job's steps on Pollux's profiles.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from functools import cached_property

from ringleader.perf.allreduce import Algorithm
from ringleader.perf.epochs import EpochsToConverge
from ringleader.perf.errors import ModelFitError
from ringleader.perf.goodput import GoodputSpeed, best_split
from ringleader.perf.gradient import GradientReport
from ringleader.perf.measured import BatchSplit, MeasuredJob
from ringleader.perf.placements import OutsideMeasurements, Placement
from ringleader.perf.profile_files import ProfileError
from ringleader.perf.speed import (
    MeasuredSpeed,
    SpeedModel,
    StepSample,
    fit_speed_model,
    job_fields,
    with_measurements,
)
from ringleader.policy.model.views import JobShape
from ringleader.sim.profiles import TrueProfile

PHASE_SLACK = 1e-12
"""Of the whole job: closer than this to an epoch's end is at it (float rounding)."""
NOMINAL_GRAD_BYTES = 1e6
"""A tabled job's gradient size is not measured: the table answers, and a fit beyond it
only needs a positive scale for its communication terms."""


def compact(gpus: int, per_node: int) -> Placement:
    """``gpus`` GPUs on as few nodes of ``per_node`` as hold them: full nodes, then the rest."""
    full, rest = divmod(gpus, per_node)
    return (per_node,) * full + ((rest,) if rest else ())


@dataclass(frozen=True)
class TabledProfile(TrueProfile):
    """A ``TrueProfile`` whose speed is a ``MeasuredJob``'s at one global batch."""

    measured: MeasuredJob | None = field(default=None, compare=False, repr=False)
    global_batch: int = 0
    _on: dict[Placement, tuple[float, float]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def _times(self, placement: Placement) -> tuple[float, float]:
        """(whole job's seconds, seconds per iteration) on ``placement``."""
        found = self._on.get(placement)
        if found is None:
            assert self.measured is not None
            m, batch = self.measured, self.global_batch
            found = (m.seconds(placement, batch), m.iteration_s(placement, batch))
            self._on[placement] = found
        return found

    def seconds_on(self, placement: tuple[int, ...], done: float = 0.0) -> float:
        return self._times(placement)[0]

    def step_time_on(self, placement: tuple[int, ...], done: float = 0.0) -> float:
        return self._times(placement)[1]

    @cached_property
    def speed_model(self) -> SpeedModel:
        """The table at each size's compact placement; the NNLS fit only beyond it."""
        return _told(self)


def tabled_profile(
    measured: MeasuredJob, global_batch: int, *, max_gpus: int, per_node: int
) -> TabledProfile:
    """The ground truth of a job of ``measured`` that keeps ``global_batch``, for 1 to
    ``max_gpus`` GPUs on nodes of ``per_node``. Raises ``ProfileError`` where the batch
    is outside what was validated."""
    measured.check_batch(global_batch)
    bounds = measured.efficiency.bounds
    # An "epoch" for the policy: the examples the first validated epoch covered.
    examples = max(1, round(measured.smallest_batch * bounds[1]))
    shape = JobShape(
        examples_per_epoch=examples,
        batch_per_worker=measured.split(1, global_batch).micro_batch,
        grad_bytes=NOMINAL_GRAD_BYTES,
        algorithm=Algorithm.RING,
        global_batch=global_batch,
    )
    steps, epochs = {}, {}
    measured.table.prepare(
        [
            (compact(g, per_node), measured.split(g, global_batch).micro_batch)
            for g in range(1, max_gpus + 1)
            if measured.split(g, global_batch).micro_batch >= measured.min_micro_batch
        ]
    )
    for gpus in range(1, max_gpus + 1):
        placement = compact(gpus, per_node)
        split = measured.split(gpus, global_batch)
        if split.micro_batch < measured.min_micro_batch:
            break  # the global batch spreads thinner than anything measured
        try:
            steps[gpus] = measured.iteration_s(placement, global_batch)
        except OutsideMeasurements:
            continue  # a size the table cannot answer is not one a policy is told of
        needed = measured.efficiency.steps_to_finish(split.global_batch)
        epochs[gpus] = needed * global_batch / examples
    if not steps:
        raise ProfileError(
            f"{measured.name}: no size from 1 to {max_gpus} GPUs, laid out on nodes of "
            f"{per_node}, was measured (or lies between measurements) at global batch "
            f"{global_batch}"
        )
    return TabledProfile(
        f"{measured.name}-b{global_batch}",
        shape,
        steps,
        EpochsToConverge.from_mapping(epochs),
        placed=True,
        measured=measured,
        global_batch=global_batch,
    )


def _told(profile: TabledProfile) -> MeasuredSpeed:
    """The step times at compact placements, and the NNLS fit to them beyond (where the
    five coefficients cannot hold the curve, its last measured step time)."""
    shape = profile.shape
    samples = [StepSample(w, t, shape.batch_at(w)) for w, t in profile.step_times.items()]
    fitted: SpeedModel
    try:
        fitted = fit_speed_model(
            samples,
            algorithm=shape.algorithm,
            grad_bytes=shape.grad_bytes,
            examples_per_epoch=shape.examples_per_epoch,
            batch_per_worker=shape.batch_per_worker,
            global_batch=shape.global_batch,
        )
    except ModelFitError:
        last = profile.step_times[max(profile.step_times)]
        fitted = SpeedModel(
            theta=(0.0, 0.0, 0.0, 0.0, last),
            algorithm=shape.algorithm,
            grad_bytes=shape.grad_bytes,
            batch_per_worker=shape.batch_per_worker,
            examples_per_epoch=shape.examples_per_epoch,
            rank=1,
            global_batch=shape.global_batch,
        )
    return with_measurements(fitted, dict(profile.step_times))


@dataclass(frozen=True)
class AdaptiveProfile(TabledProfile):
    """A tabled job that picks its own batch: on each placement and in each epoch, the one
    with the best goodput (``perf.goodput``), as Pollux's jobs do.

    Its work is progress in steps at the smallest batch (``Efficiency.bounds``'s last);
    its speed, that epoch's best goodput over it. A fixed-batch policy is told the
    table at the job's submitted batch (``TabledProfile``); the speed a policy that
    weighs goodput reads is ``best``.
    """

    per_node: int = 1
    """GPUs per node of the cluster: how ``speed_model`` lays out each size, compactly."""
    _best: dict[tuple[Placement, int], tuple[float, BatchSplit]] = field(
        default_factory=dict, compare=False, repr=False
    )

    @cached_property
    def speed_model(self) -> SpeedModel:
        """The fixed-batch table (``TabledProfile``), and the best goodput at each size."""
        told = _told(self)
        return GoodputSpeed(**job_fields(told), measured=told.measured, best_at=self._best_at)

    def _best_at(self, gpus: int, done: float) -> float:
        try:
            return self.best(compact(gpus, self.per_node), self.phase(done))[0]
        except OutsideMeasurements:
            return 0.0  # no batch it may take was measured there: worth nothing

    def phase(self, done: float) -> int:
        """The epoch a job ``done`` of the way through is in (one a rounding short of its
        end counts as the next: the engine stops a job at the end to move it on)."""
        assert self.measured is not None
        bounds = self.measured.efficiency.bounds
        progress = (done + PHASE_SLACK) * bounds[-1]
        return min(bisect.bisect_right(bounds, progress) - 1, len(bounds) - 2)

    def phase_end(self, done: float) -> float:
        """The fraction done where the epoch ``done`` is in ends."""
        assert self.measured is not None
        bounds = self.measured.efficiency.bounds
        return bounds[self.phase(done) + 1] / bounds[-1]

    def best(self, placement: Placement, epoch: int) -> tuple[float, BatchSplit]:
        """(progress per second, batch split) at the best batch on ``placement``."""
        key = (placement, epoch)
        found = self._best.get(key)
        if found is None:
            assert self.measured is not None
            found = self._best[key] = best_split(self.measured, placement, epoch)
        return found

    def seconds_on(self, placement: tuple[int, ...], done: float = 0.0) -> float:
        assert self.measured is not None
        rate, _ = self.best(placement, self.phase(done))
        return self.measured.efficiency.bounds[-1] / rate

    def step_time_on(self, placement: tuple[int, ...], done: float = 0.0) -> float:
        assert self.measured is not None
        _, split = self.best(placement, self.phase(done))
        step, sync = self.measured.table.times(placement, split.micro_batch)
        return step + split.accumulation * (step - sync)

    def batch_on(self, placement: tuple[int, ...], done: float = 0.0) -> float:
        """The examples per GPU of the batch the job picked there, accumulated steps
        included: the batch its step time was taken at, as it reports it."""
        _, split = self.best(placement, self.phase(done))
        return float(split.micro_batch * (split.accumulation + 1))

    def gradient_on(self, placement: tuple[int, ...], done: float) -> GradientReport:
        """The gradient statistics of this epoch at the batch the job takes on
        ``placement``, as it measures them while it trains (AdaptDL's estimate)."""
        assert self.measured is not None
        efficiency = self.measured.efficiency
        epoch = self.phase(done)
        _, split = self.best(placement, epoch)
        batch = min(max(split.global_batch, efficiency.smallest_batch), efficiency.largest_batch)
        sqr, var = efficiency.stats(batch, epoch)
        smallest, largest = efficiency.smallest_batch, efficiency.largest_batch
        return GradientReport(sqr, var, smallest, largest, self.measured.max_micro_batch)


def adaptive_profile(
    measured: MeasuredJob, global_batch: int, *, max_gpus: int, per_node: int
) -> AdaptiveProfile:
    """``tabled_profile``'s job, picking its own batch as it trains (``AdaptiveProfile``)."""
    fixed = tabled_profile(measured, global_batch, max_gpus=max_gpus, per_node=per_node)
    return AdaptiveProfile(
        f"{fixed.name}-adaptive",
        fixed.shape,
        fixed.step_times,
        fixed.epochs,
        placed=True,
        phased=True,
        measured=measured,
        global_batch=global_batch,
        per_node=per_node,
    )


def spread_over(measured: MeasuredJob, global_batch: int, *, adaptive: bool) -> int:
    """The most GPUs a job's batch spreads over at the smallest per-GPU batch measured:
    its own global batch, or (``adaptive``) the largest one validated."""
    spread = measured.largest_batch if adaptive else global_batch
    return spread // measured.min_micro_batch


def job_profile(
    measured: MeasuredJob, global_batch: int, *, adaptive: bool, max_gpus: int, per_node: int
) -> TabledProfile:
    """``adaptive_profile`` or ``tabled_profile``, as the job adapts its batch or not."""
    build = adaptive_profile if adaptive else tabled_profile
    return build(measured, global_batch, max_gpus=max_gpus, per_node=per_node)
