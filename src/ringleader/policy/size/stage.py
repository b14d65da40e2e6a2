"""The size stage's protocol: how many GPUs each job gets, in two steps."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ringleader.policy.model.objective import Candidate
from ringleader.policy.size.growth import Counts
from ringleader.policy.size.steps import Growth


class Allocator(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def needs_speed(self) -> bool:
        """Whether the allocator predicts from speed models (so needs profiling)."""
        ...

    @property
    def needs_true_remaining(self) -> bool:
        """Whether it ranks jobs by their true remaining time (an oracle)."""
        ...

    def base(self, jobs: Sequence[Candidate], capacity: int) -> Counts: ...

    def grow(self, jobs: Sequence[Candidate], counts: Counts, free: int) -> Growth: ...
