"""The share stage's protocol: jobs the plan left waiting take turns on held GPUs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple, Protocol

from ringleader.policy.model.plan import Assignment, Turn
from ringleader.policy.model.views import ClusterView, JobView


class Shared(NamedTuple):
    """A share stage's result: the plan's assignments with residents added and
    rotated, when it wants to be asked again, and each suspended job's turn."""

    assignments: Mapping[str, Assignment]
    wake_at: float | None
    turns: Mapping[str, Turn]


class Share(Protocol):
    """The share stage: who else resides on the GPUs the plan gave out, and who runs."""

    @property
    def packs(self) -> bool:
        """Whether it runs jobs side by side (on trial), so a body must profile each job
        per partner as well as alone (``Needs.packing``)."""
        ...

    def share(
        self,
        assignments: Mapping[str, Assignment],
        ordered: Sequence[JobView],
        cluster: ClusterView,
        now: float,
    ) -> Shared: ...
