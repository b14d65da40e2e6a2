"""The place stage's protocol: which GPUs each sized job gets."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from ringleader.policy.model.views import ClusterView, Device, JobView


class Place(Protocol):
    """The place stage: which GPUs each job with a non-zero count gets.

    A job may get fewer than its count (``TypeAware`` keeps a job that could
    not grow without slowing down where it is) or none (it waits); ``Policy``
    runs it with no more workers than its count.
    """

    @property
    def within_counts(self) -> bool:
        """Whether it never gives a job more GPUs than its count, so the pipeline can run
        each job on all it was given. A stage that does not say so is taken as one that
        may (its jobs run on at most their counts)."""
        ...

    def place(
        self, counts: Mapping[str, int], jobs: Sequence[JobView], cluster: ClusterView
    ) -> dict[str, tuple[Device, ...]]: ...
