"""Goodput where jobs report it: Pollux's allocation over jobs that adapt their batch.

A job that adapts its batch to its GPUs reports its gradient statistics
(``JobView.gradient``), and the profile stage tells its speed as goodput
(``perf.gradient.online_goodput``): what one more GPU is worth to it then
depends on how much a larger batch still helps, which the doubling heuristic,
weighing a fixed batch, cannot see. ``GoodputWhereReported`` sizes a decision
by goodput speed-ups weighed by remaining time (``SHORTER_FIRST``, a
``fitness.PowerMeanSpeedup``) when any job in it tells goodput, and by its
``inner`` allocator otherwise: a cluster whose jobs keep their batch is sized
exactly as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ringleader.perf.goodput import GoodputSpeed
from ringleader.policy.allot.shortest import ShortestGoodput
from ringleader.policy.allot.stage import Allotted
from ringleader.policy.model.memory import Memory
from ringleader.policy.model.objective import Candidate
from ringleader.policy.model.views import ClusterView
from ringleader.policy.size.fitness import PowerMeanSpeedup
from ringleader.policy.size.growth import Counts
from ringleader.policy.size.stage import Allocator
from ringleader.policy.size.steps import Growth
from ringleader.policy.size.urgency import LongerCount

TRUST = 16
"""How far past its measured sizes the default grows a job, as a multiple of the most
GPUs it ran on. Pollux's rule is 2; on a model learned online from a prior of perfect
scaling that is one doubling, and one restart, at a time, where Pollux's simulator
knows each job's curve. How the figure was chosen: ``docs/pollux.md``."""


URGENCY = LongerCount(0.75)
"""How the default weighs a job's speed-up by how long it has left: by the jobs with at
least its remaining seconds, to the power 0.75 (heSRPT's rank, ``size.urgency``). A job's
remaining seconds come from the epochs it was submitted with and the progress it
reported. How the rule and the power were chosen: ``docs/pollux.md``."""

SHORTER_FIRST = PowerMeanSpeedup("goodput", trust=TRUST, shortest_first=1.0, urgency=URGENCY)
"""The default's allocation over goodput: the counts that maximise ``Σ w · speedup``,
``w`` by ``URGENCY``, not Pollux's harmonic mean, which serves every job before any is
served well."""


TYPED = ShortestGoodput(TRUST, URGENCY)
"""``SHORTER_FIRST`` over GPU type and count at once, for a cluster of several types."""


@dataclass(frozen=True, slots=True)
class GoodputWhereReported:
    """``goodput`` for a decision with a job that tells goodput, ``inner`` otherwise; on a
    cluster of several GPU types, ``typed`` chooses each such job's type with its count."""

    inner: Allocator
    goodput: PowerMeanSpeedup = field(default_factory=lambda: SHORTER_FIRST)
    typed: ShortestGoodput = field(default_factory=lambda: TYPED)

    @property
    def name(self) -> str:
        return f"{self.inner.name}+goodput"

    @property
    def needs_speed(self) -> bool:
        return True

    @property
    def needs_true_remaining(self) -> bool:
        return self.inner.needs_true_remaining

    @property
    def memory(self) -> Memory[Any] | None:
        """What ``inner`` keeps between decisions (``goodput`` keeps nothing)."""
        memory = getattr(self.inner, "memory", None)
        return memory if isinstance(memory, Memory) else None

    def _chosen(self, jobs: Sequence[Candidate]) -> Allocator:
        for c in jobs:  # a plain loop: compiled, a look at 50k candidates is cheap
            speed = c.speed
            if isinstance(speed, GoodputSpeed) and speed.best_at is not None:
                return self.goodput
        return self.inner

    def allot_types(
        self, jobs: Sequence[Candidate], cluster: ClusterView, now: float
    ) -> Allotted | None:
        """``typed``'s allotments where the cluster has several types, a job tells
        goodput and the problem is small enough to solve (``ShortestGoodput.fits``);
        None otherwise (``size.stage.TypedAllocator``)."""
        if not cluster.heterogeneous or not self.typed.fits(len(jobs), cluster):
            return None
        if self._chosen(jobs) is not self.goodput:
            return None
        return self.typed.allot(jobs, cluster, now)

    def base(self, jobs: Sequence[Candidate], capacity: int) -> Counts:
        return self._chosen(jobs).base(jobs, capacity)

    def grow(self, jobs: Sequence[Candidate], counts: Counts, free: int) -> Growth:
        return self._chosen(jobs).grow(jobs, counts, free)
