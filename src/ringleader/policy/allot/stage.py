"""The allot stage's protocol: each job's GPU type and count, chosen together."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple, Protocol

from ringleader.policy.model.objective import Candidate
from ringleader.policy.model.plan import Note
from ringleader.policy.model.views import ClusterView


class Allotment(NamedTuple):
    """``gpus`` GPUs, all of ``gpu_type`` (``""`` on a cluster that names no types)."""

    gpu_type: str
    gpus: int


class Allotted(NamedTuple):
    """What an allot stage decided: each job that runs, and why (``Plan.sizing``'s notes)."""

    allotments: Mapping[str, Allotment]
    notes: Mapping[str, Note]


class Allot(Protocol):
    """Each job's type and count (see the package docstring)."""

    @property
    def name(self) -> str: ...

    @property
    def needs_speed(self) -> bool:
        """Whether it reads speed models (then they are known on arrival)."""
        ...

    @property
    def needs_true_remaining(self) -> bool:
        """Whether it reads each job's true remaining time (an oracle)."""
        ...

    @property
    def round_s(self) -> float:
        """How often it wants to decide again, as its paper's rounds do."""
        ...

    def allot(self, jobs: Sequence[Candidate], cluster: ClusterView, now: float) -> Allotted:
        """What each job of ``jobs`` (in submission order) gets; a job left out waits."""
        ...
