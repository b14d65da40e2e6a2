"""The profile stage's protocol: where a job's speed model comes from.

A profile stage splits the jobs, in submission order, into candidates the size
stage can rank (each with the speed model to trust for it, if any) and jobs
still exploring, which it probes at sizes of its choosing (``Probe``).
``known_on_arrival`` and ``probes`` say what the stage asks of the body that
runs it (``Needs``): a true model from the start, and room for probes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ringleader.policy.model.objective import Candidate
from ringleader.policy.model.views import ClusterView, JobView


class Probe:
    """An exploring job's next probe: the size to run at and seconds still to run.

    A plain class, not a named tuple nor a frozen dataclass: a decision asks for
    one per exploring job (docs/scale.md, "The compiled hot path"). Equal by its
    fields, like the tuple it was.
    """

    __slots__ = ("hold", "seconds_left", "workers")

    def __init__(self, workers: int, seconds_left: float, hold: int) -> None:
        self.workers = workers
        self.seconds_left = seconds_left
        self.hold = hold
        """The GPUs the probe holds: the job's largest probe size, kept while it explores."""

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Probe):
            return NotImplemented
        return (self.workers, self.seconds_left, self.hold) == (
            other.workers,
            other.seconds_left,
            other.hold,
        )

    def __hash__(self) -> int:
        return hash((self.workers, self.seconds_left, self.hold))

    def __repr__(self) -> str:
        fields = f"workers={self.workers!r}, seconds_left={self.seconds_left!r}"
        return f"Probe({fields}, hold={self.hold!r})"


class Profiling(Protocol):
    """Where each job's speed model comes from (see the module docstring)."""

    @property
    def name(self) -> str: ...

    @property
    def known_on_arrival(self) -> bool:
        """Whether it trusts a model known when the job arrives (only a simulator has one)."""
        ...

    @property
    def probes(self) -> bool:
        """Whether it runs jobs at sizes of its own choosing to measure them."""
        ...

    def split(
        self, jobs: Sequence[JobView], cluster: ClusterView | None = None
    ) -> tuple[list[Candidate], list[JobView]]:
        """Candidates to size, and the jobs still exploring, each in the order given;
        ``cluster`` tells how GPUs are grouped in nodes, where a model weighs that."""
        ...

    def probe(self, job: JobView) -> Probe | None:
        """An exploring job's next probe (None: it has none left to run)."""
        ...
