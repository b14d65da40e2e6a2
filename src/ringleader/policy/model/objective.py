"""The quantity the elastic allocators minimise: a job's predicted remaining time.

``Q_j / f_j(w)`` of SPEC A4: remaining epochs at ``w`` workers over the speed
in epochs per second at ``w``. Both depend on ``w`` — speed through the
allreduce cost, epochs through the global batch size.
"""

from __future__ import annotations

from functools import lru_cache

from ringleader.perf.epochs import EpochsToConverge
from ringleader.perf.speed import SpeedModel
from ringleader.policy.model.views import JobView


class SoloCurve:
    """Predicted time to train a whole job at each worker count, memoised per size.

    One curve per (epochs, speed model) pair, shared by every decision: the
    allocators ask for the same few sizes of the same few job models thousands
    of times per simulated day.
    """

    __slots__ = ("_cache", "_epoch_cache", "_epochs", "_speed")

    def __init__(self, epochs: EpochsToConverge, speed: SpeedModel) -> None:
        self._epochs = epochs
        self._speed = speed
        self._cache: dict[int, float] = {}
        self._epoch_cache: dict[int, float] = {}

    def __call__(self, workers: int) -> float:
        value = self._cache.get(workers)
        if value is None:
            value = self._epochs.at(workers) / self._speed.epochs_per_second(workers)
            self._cache[workers] = value
        return value

    def epoch_seconds(self, workers: int) -> float:
        """Seconds one epoch takes at ``workers`` (what ``Doubling(per_epoch=True)`` weighs)."""
        value = self._epoch_cache.get(workers)
        if value is None:
            value = 1.0 / self._speed.epochs_per_second(workers)
            self._epoch_cache[workers] = value
        return value


@lru_cache(maxsize=1 << 17)
def solo_curve(epochs: EpochsToConverge, speed: SpeedModel) -> SoloCurve:
    """The shared curve; room for 131k (job model, epochs) pairs, so a decision over
    50k jobs that each converge differently finds last decision's curves (16k evicted
    them all between decisions)."""
    return SoloCurve(epochs, speed)


class Candidate:
    """A job with the speed model the allocator should trust for it (if any).

    ``measured``: False while ``speed`` is a guess made before the job reported
    anything. Equal only to itself. A plain class, neither frozen nor a
    dataclass, though no stage changes one: a decision makes one per job in
    the system under the fixed-size policies (docs/scale.md, "The compiled hot path").
    """

    __slots__ = ("_solo", "chain", "chain_by", "job", "measured", "speed")

    def __init__(self, job: JobView, speed: SpeedModel | None, measured: bool = True) -> None:
        self.job = job
        self.speed = speed
        self.measured = measured
        self._solo: SoloCurve | None = None if speed is None else solo_curve(job.epochs, speed)
        self.chain: object = None
        self.chain_by: object = None
        """What a size stage's cache last kept for it, and that cache: opaque here (the
        stage's ``_incremental`` chains own it), kept on the candidate as a candidate is
        kept from one decision to the next while its view is."""

    def __repr__(self) -> str:
        return f"Candidate(job={self.job.id!r}, speed={self.speed!r}, measured={self.measured!r})"

    @property
    def solo(self) -> SoloCurve | None:
        """The memoised curve the candidate predicts from (None: no speed model); shared
        by every candidate of the same epochs and speed model."""
        return self._solo

    def whole_seconds(self, workers: int) -> float:
        """Seconds the whole job would take at ``workers`` (``remaining_seconds`` is this
        times the fraction left): what a kept chain of the greedy weighs
        (``growth.greedy``'s ``scaled``)."""
        if self._solo is None:
            raise ValueError(f"job {self.job.id} has no speed model to predict from")
        return self._solo(workers)

    def remaining_seconds(self, workers: int) -> float:
        if self._solo is None:
            raise ValueError(f"job {self.job.id} has no speed model to predict from")
        return self.job.remaining_fraction * self._solo(workers)

    def epoch_seconds(self, workers: int) -> float:
        """Seconds one epoch takes at ``workers``, by the candidate's speed model."""
        if self._solo is None:
            raise ValueError(f"job {self.job.id} has no speed model to predict from")
        return self._solo.epoch_seconds(workers)
