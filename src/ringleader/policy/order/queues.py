"""Who goes first: the order stage of the policy core.

An order stage takes the candidates in submission order and returns them in
the order the size stage should serve them (``Policy.decide``). It is pure:
the snapshot and the decision's ``now`` are all it reads. Stages nest: a
``Prioritised`` order wraps another and keeps its order among equal
priorities; ``ringleader.policy.order.fairshare.FairShare`` wraps one and
interleaves users.

* ``Fifo`` — submission order.
* ``LeastAttained`` — Tiresias' discretised least-attained-service queues
  (Gu et al., NSDI 2019): a job's attained service is GPUs × seconds it has
  held them; jobs sit in queues by thresholds on it, FIFO within a queue, and
  lower queues go first. With ``starve_after_s``, a job that has waited that
  long goes ahead of every queue (the starvation guard Tiresias also has), so
  a long job is slowed by new ones but never stopped for good.
* ``ShortestRemaining`` — shortest true remaining time first: an oracle.
* ``Prioritised`` — higher ``priority`` first, the wrapped order within.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ringleader.policy.model.objective import Candidate
from ringleader.policy.order.stage import Order


@dataclass(frozen=True, slots=True)
class Fifo:
    """Submission order, as given."""

    needs_speed: bool = False
    needs_true_remaining: bool = False

    def order(self, jobs: Sequence[Candidate], now: float) -> list[Candidate]:
        return list(jobs)


def las_queue(c: Candidate, thresholds_gpu_s: tuple[float, ...], effective: bool = False) -> int:
    """Index of the least-attained-service queue a job is in (0 = least served).

    The thresholds are a tuple, not any sequence, as they are read per job per decision
    (docs/scale.md, "The compiled hot path")."""
    got = c.job.attained_gpu_s
    if effective and c.job.attained_effective_s is not None:
        got = c.job.attained_effective_s
    passed = 0
    for t in thresholds_gpu_s:  # a loop, not sum(generator): asked per job per decision
        if got >= t:
            passed += 1
    return passed


@dataclass(frozen=True, slots=True)
class LeastAttained:
    """Least-attained-service queues, FIFO within one; optionally a starvation guard."""

    thresholds_gpu_s: tuple[float, ...] = (3600.0, 36_000.0)
    starve_after_s: float | None = None
    """A job waiting (queued or time-sliced out) this long goes ahead of every queue."""
    effective: bool = False
    """Count service in the job's best GPUs' terms (``JobView.attained_effective_s``):
    an hour on a GPU type it runs at half speed on is half an hour served. Gavel's
    heterogeneity-aware LAS is fair in effective throughput the same way."""
    needs_speed: bool = False
    needs_true_remaining: bool = False

    def __post_init__(self) -> None:
        if self.starve_after_s is not None and not self.starve_after_s > 0:
            raise ValueError(f"starve_after_s must be positive, got {self.starve_after_s}")

    def queue(self, c: Candidate, now: float) -> int:
        """The queue ``c`` is served from now: -1 when starving, else by attained service."""
        job = c.job
        guard = self.starve_after_s
        waiting = job.workers == 0 or job.suspended
        if guard is not None and waiting and now - job.state_since >= guard:
            return -1
        return las_queue(c, self.thresholds_gpu_s, self.effective)

    def order(self, jobs: Sequence[Candidate], now: float) -> list[Candidate]:
        """``jobs`` by ``queue``, FIFO within one: a stable sort by a small number (-1 to
        the number of thresholds), made as one list per queue, without a key call per
        job."""
        if not self.thresholds_gpu_s and self.starve_after_s is None:
            return list(jobs)
        queues: list[list[Candidate]] = [[] for _ in range(len(self.thresholds_gpu_s) + 2)]
        for c in jobs:
            queues[self.queue(c, now) + 1].append(c)
        out = queues[0]
        for q in queues[1:]:
            out.extend(q)
        return out


@dataclass(frozen=True, slots=True)
class ShortestRemaining:
    """ORACLE: shortest true remaining time at the job's requested size first."""

    needs_speed: bool = True
    needs_true_remaining: bool = True

    def order(self, jobs: Sequence[Candidate], now: float) -> list[Candidate]:
        return sorted(jobs, key=lambda c: c.remaining_seconds(c.job.requested_gpus))


class Wrapping:
    """An order stage around another one, ``within``: it needs what ``within`` needs."""

    __slots__ = ()
    within: Order

    @property
    def needs_speed(self) -> bool:
        return self.within.needs_speed

    @property
    def needs_true_remaining(self) -> bool:
        return self.within.needs_true_remaining


@dataclass(frozen=True, slots=True)
class Prioritised(Wrapping):
    """Higher ``priority`` first; ``within`` orders jobs of equal priority."""

    within: Order = field(default_factory=Fifo)

    def order(self, jobs: Sequence[Candidate], now: float) -> list[Candidate]:
        ordered = self.within.order(jobs, now)
        if not ordered:
            return ordered
        first = ordered[0].job.priority
        # A loop, not ``all`` over a generator (docs/scale.md, "The compiled hot path").
        for c in ordered:
            if c.job.priority != first:
                return sorted(ordered, key=lambda d: -d.job.priority)
        return ordered
