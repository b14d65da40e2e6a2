"""How many GPUs each job gets: the size stage of the policy core.

A size stage (an ``Allocator``) works in two steps so that profiling can
interleave its own claims between them (see ``ringleader.policy.profile.sources``).
Both take the jobs in the order the order stage put them
(``ringleader.policy.order.queues``):

* ``base``: the minimum each job needs to run at all, in that order. Without
  ``backfill`` it stops at the first job that does not fit, so a wide job is
  never starved by a stream of narrow ones; with it, smaller jobs behind may
  run, so GPUs do not idle behind a wide job (Tiresias does this; a
  preemptive order is what keeps the wide job from starving);
* ``grow``: how the GPUs left over are handed out, with the allocator's own
  account of where each job's growth stopped (``Sizing``: at its maximum, no
  gain, the restart not won back, or outbid for the GPUs left).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ringleader.policy.model.memory import Memory, memory_of
from ringleader.policy.model.objective import Candidate
from ringleader.policy.size._incremental.bases import LastBase, fresh_base, least_size
from ringleader.policy.size._incremental.memory import Growing
from ringleader.policy.size.growth import Counts, Step, greedy
from ringleader.policy.size.stage import Allocator
from ringleader.policy.size.steps import Growth

__all__ = [
    "Allocator",
    "Doubling",
    "FixedSize",
    "OptimusGreedy",
    "backfill_base",
    "fifo_base",
    "least_size",
]


def fifo_base(jobs: Sequence[Candidate], capacity: int, size_of: _SizeOf | None = None) -> Counts:
    """Give each job ``size_of(job)`` GPUs (default: ``least_size``) in order until one
    does not fit (built from nothing: the stages keep the last ones, ``bases.LastBase``)."""
    return fresh_base(jobs, capacity, False, size_of)


class _SizeOf(Protocol):
    def __call__(self, c: Candidate, /) -> int: ...


def backfill_base(
    jobs: Sequence[Candidate], capacity: int, size_of: _SizeOf | None = None
) -> Counts:
    """Give each job, in order, ``size_of(job)`` GPUs (default: ``least_size``) if that
    many are still free (built from nothing, as ``fifo_base``)."""
    return fresh_base(jobs, capacity, True, size_of)


@dataclass(frozen=True, slots=True)
class FixedSize:
    """Every job runs at one fixed size and waits its turn (the Fixed-N baselines).

    ``size=None`` uses each job's own request instead of one size for all;
    ``backfill`` lets smaller jobs run past one that does not fit.
    """

    size: int | None = None
    backfill: bool = False
    needs_speed: bool = False
    needs_true_remaining: bool = False
    memory: Memory[LastBase] = field(
        default_factory=memory_of(LastBase), init=False, repr=False, compare=False
    )
    """The last decision's base counts (``bases.LastBase``): not part of what the stage is."""

    @property
    def name(self) -> str:
        return "fifo" if self.size is None else f"fixed-{self.size}"

    def _size(self, c: Candidate) -> int:
        return c.job.requested_gpus if self.size is None else self.size

    def base(self, jobs: Sequence[Candidate], capacity: int) -> Counts:
        return self.memory.kept.base(jobs, capacity, self.backfill, self._size)

    def grow(self, jobs: Sequence[Candidate], counts: Counts, free: int) -> Growth:
        return Growth(dict(counts), {})


@dataclass(frozen=True, slots=True)
class Doubling:
    """The doubling heuristic (SPEC A4): double the job with the best gain per GPU.

    Gain per GPU of doubling ``w → 2w`` is ``(R(w) − R(2w)) / w``, ``R`` the
    predicted remaining time. Sizes stay powers of two times the starting size,
    so a bad non-power-of-two step (8 → 9) never blocks a good doubling
    (8 → 16).

    ``per_epoch``: score a doubling by the time per epoch it saves per GPU
    instead, every job's remaining work counted as one epoch, for a
    scheduler that does not know how long a job will run (the ``ringleader``
    policy). ``backfill``: see ``FixedSize``.
    """

    name: str = "doubling"
    backfill: bool = False
    per_epoch: bool = False
    needs_speed: bool = True
    needs_true_remaining: bool = False
    memory: Memory[Growing] = field(
        default_factory=memory_of(Growing), init=False, repr=False, compare=False
    )
    """The last decision's base counts, and the growth chains kept across decisions: per
    epoch or per unit of work, a step depends only on the job's model and sizes."""

    def base(self, jobs: Sequence[Candidate], capacity: int) -> Counts:
        return self.memory.kept.base.base(jobs, capacity, self.backfill)

    @staticmethod
    def _step(c: Candidate, w: int) -> Step | None:
        """Per unit of work: the greedy scales it by the work left (``scaled``)."""
        if 2 * w > c.job.max_gpus:
            return None
        return w, c.whole_seconds(w), c.whole_seconds(2 * w)

    @staticmethod
    def _epoch_step(c: Candidate, w: int) -> Step | None:
        if 2 * w > c.job.max_gpus or c.speed is None:
            return None
        return w, c.epoch_seconds(w), c.epoch_seconds(2 * w)

    def grow(self, jobs: Sequence[Candidate], counts: Counts, free: int) -> Growth:
        sizes = self.memory.kept.base.given(jobs, counts)
        if self.per_epoch:
            return greedy(
                jobs,
                counts,
                free,
                self._epoch_step,
                per_epoch=True,
                chains=self.memory.kept.chains,
                sizes=sizes,
            )
        return greedy(
            jobs, counts, free, self._step, chains=self.memory.kept.chains, scaled=True, sizes=sizes
        )


@dataclass(frozen=True, slots=True)
class OptimusGreedy:
    """Optimus' heuristic: add one worker at a time where it cuts remaining time most.

    It stops at the first step that does not help, so it stalls where ``w+1``
    is worse than ``w`` even if ``2w`` would be much better.
    """

    name: str = "optimus"
    needs_speed: bool = True
    needs_true_remaining: bool = False
    memory: Memory[Growing] = field(
        default_factory=memory_of(Growing), init=False, repr=False, compare=False
    )
    """The last decision's base counts, and the growth chains kept across decisions: per
    unit of work, a step depends only on the job's model and sizes (as ``Doubling``'s)."""

    def base(self, jobs: Sequence[Candidate], capacity: int) -> Counts:
        return self.memory.kept.base.base(jobs, capacity, False)

    @staticmethod
    def _step(c: Candidate, w: int) -> Step | None:
        """Per unit of work: the greedy scales it by the work left (``scaled``)."""
        if w + 1 > c.job.max_gpus:
            return None
        return 1, c.whole_seconds(w), c.whole_seconds(w + 1)

    def grow(self, jobs: Sequence[Candidate], counts: Counts, free: int) -> Growth:
        sizes = self.memory.kept.base.given(jobs, counts)
        return greedy(
            jobs, counts, free, self._step, chains=self.memory.kept.chains, scaled=True, sizes=sizes
        )
