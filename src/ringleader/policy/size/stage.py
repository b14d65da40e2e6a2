"""The size stage's protocol: how many GPUs each job gets, in two steps."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ringleader.policy.allot.stage import Allotted
from ringleader.policy.model.objective import Candidate
from ringleader.policy.model.views import ClusterView
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


@runtime_checkable
class TypedAllocator(Protocol):
    """An allocator that, on a cluster of several GPU types, may choose each job's type
    with its count (an allot stage's answer), which the pipeline then lays out as
    allotted instead of asking its place stage."""

    def allot_types(
        self, jobs: Sequence[Candidate], cluster: ClusterView, now: float
    ) -> Allotted | None:
        """Each job's type and count; None: size this decision by counts alone."""
        ...
