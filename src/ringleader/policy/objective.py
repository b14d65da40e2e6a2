"""The quantity the elastic allocators minimise: a job's predicted remaining time.

``Q_j / f_j(w)`` of SPEC A4: remaining epochs at ``w`` workers over the speed
in epochs per second at ``w``. Both depend on ``w`` — speed through the
allreduce cost, epochs through the global batch size.
"""

from __future__ import annotations

from dataclasses import dataclass

from ringleader.perf.speed import SpeedModel
from ringleader.policy.views import JobView


@dataclass(frozen=True, slots=True)
class Candidate:
    """A job with the speed model the allocator should trust for it (if any)."""

    job: JobView
    speed: SpeedModel | None

    def remaining_seconds(self, workers: int) -> float:
        if self.speed is None:
            raise ValueError(f"job {self.job.id} has no speed model to predict from")
        return self.job.remaining_epochs(workers) / self.speed.epochs_per_second(workers)
