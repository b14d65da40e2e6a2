"""Handing out the GPUs left over: the greedy that the elastic size stages share.

``greedy`` gives GPUs, one step of one job at a time, to the step that
saves most per GPU (``ringleader.policy.allocator`` defines the steps:
doubling, or one worker at a time). A job's steps from a size form a chain
(``ringleader.policy.chains``): each step is taken only after the one before
it, and the chain stops where the job is at its maximum, a step gains
nothing, a job not yet measured reaches the size it asked to start at, or a
grow would not win back its restart (``ringleader.policy.payback``). Taking
the best next step of any job, again and again, is then a walk through all
the chains' steps in a fixed order (``chains.walk``), without a heap of
every job's next step. Where the step stage's objective reads no progress
(per epoch), a chain depends only on the job's speed model and sizes, so
such a stage passes ``Chains`` and its chains are kept from one decision to
the next instead of asking its models again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from ringleader.policy.chains import Chain, Chains, Counts, Step, StepOf, start_size, walk
from ringleader.policy.objective import Candidate
from ringleader.policy.plan import NO_MODEL, Note

__all__ = ["Chains", "Counts", "Growth", "Step", "StepOf", "greedy", "start_size"]


class Growth(NamedTuple):
    """What ``grow`` returns: every job's size, and why each job it weighed stopped.

    ``notes``: a ``plan.Sizing`` as a plain ``Note``, for the jobs whose
    growth the allocator weighed; a job it did not is ``FIXED``
    (``plan.SizingNotes``). ``later``: more notes, worked out only if someone
    asks (most decisions' never are).
    """

    counts: Counts
    notes: dict[str, Note]
    later: Callable[[], dict[str, Note]] | None = None


def greedy(
    jobs: Sequence[Candidate],
    counts: Counts,
    free: int,
    step: StepOf,
    *,
    per_epoch: bool = False,
    chains: Chains | None = None,
) -> Growth:
    """Hand out GPUs by repeatedly taking the best-scoring next step of any job.

    ``step(c, w)`` returns ``(gpus added, objective at w, objective after)``
    for growing ``c`` from ``w`` workers, or ``None`` when it cannot grow; a
    step's score is the objective it saves per added GPU (``per_epoch``: the
    objective is seconds per epoch, not remaining seconds). A step that does
    not fit the GPUs left is dropped for good: free GPUs only ever shrink. A
    step that takes a running job past its size without winning back the
    restart is never taken (``ringleader.policy.payback``). ``chains``: the
    step stage's answers depend on nothing a job's progress changes, and its
    chains are kept there (see the module docstring).

    A job not yet measured (``Candidate.measured`` false) grows first, in
    FIFO order, up to its ``start_size``: its guessed model has no scale to
    compare with measured jobs
    (before its first report even its examples per epoch are unknown), and
    ranking it on the guess would give it GPUs one moment and take them back
    the moment it reports, a restart for nothing.

    Where each job's growth stopped, and on what numbers, is noted; most
    notes are worked out only when asked for (``Growth.later``).
    """
    out = dict(counts)
    # Notes are plain tuples in ``Sizing``'s field order (see ``plan.Sizing``):
    # stop, workers, next_workers, before_s, after_s, per_epoch, free, bar,
    # saved_s, limit, held, measured.
    notes: dict[str, Note] = {}
    grown: list[Candidate] = []
    of: list[Chain] = []
    for c in jobs:
        w = out.get(c.job.id, 0)
        if w == 0 or not c.job.elastic:
            continue  # waiting, or FIXED (the default)
        if c.speed is None:
            notes[c.job.id] = (NO_MODEL, w)
            continue
        grown.append(c)
        of.append(Chain(w) if chains is None else chains.of(c, w))
    return Growth(out, notes, walk(grown, of, free, step, per_epoch, out))
