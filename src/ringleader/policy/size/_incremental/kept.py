"""The greedy over kept chains: each job's chain gathered, then walked in order.

What ``growth.greedy`` hands out with a heap, worked out along chains kept
from one decision to the next: the walk (``walk``), in numpy for thousands of
jobs (``batched``). Jobs already at their maximum are walked without a chain
(``_AtMax`` writes their notes when asked).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ringleader.policy.model.objective import Candidate
from ringleader.policy.model.plan import NO_MODEL, Note, note
from ringleader.policy.size._incremental import batched
from ringleader.policy.size._incremental.chain import Chain
from ringleader.policy.size._incremental.chains import Chains
from ringleader.policy.size._incremental.walk import walk
from ringleader.policy.size.steps import Counts, Growth, StepOf, at_max


class _AtMax:
    """The notes of the jobs at their maximum (``chains.at_max``), with the walk's: worked
    out when first asked, as the walk's are."""

    __slots__ = ("jobs", "per_epoch", "sizes", "then")

    def __init__(
        self,
        jobs: list[Candidate],
        sizes: list[int],
        per_epoch: bool,
        then: Callable[[], dict[str, Note]],
    ) -> None:
        self.jobs = jobs
        self.sizes = sizes
        self.per_epoch = per_epoch
        self.then = then

    def __call__(self) -> dict[str, Note]:
        notes = self.then()
        jobs, sizes, per_epoch = self.jobs, self.sizes, self.per_epoch
        for i in range(len(jobs)):
            notes[jobs[i].job.id] = at_max(jobs[i], sizes[i], per_epoch)
        return notes


def grow_over_chains(
    jobs: Sequence[Candidate],
    counts: Counts,
    free: int,
    step: StepOf,
    per_epoch: bool,
    chains: Chains,
    scaled: bool,
    sizes: list[int] | None,
) -> Growth:
    """``growth.greedy`` over ``chains`` (its arguments, as it was given them)."""
    out = dict(counts)
    notes: dict[str, Note] = {}
    by_index: list[Candidate] = []
    of: list[Chain] = []
    fractions: list[float] = []
    full: list[Candidate] = []
    """Jobs at their maximum, walked without a chain: no step grows a job past it."""
    full_at: list[int] = []
    """Their sizes."""
    rows: batched.Rows | None = None
    """The jobs a walk in numpy walks, gathered here (``batched.Rows``), for a large one."""
    if len(jobs) >= chains.batched_from:
        rows = batched.Rows(chains.flat, step, per_epoch, scaled)
    k = -1
    for c in jobs:
        k += 1
        job = c.job
        w = sizes[k] if sizes is not None else 0
        if w == 0:  # not given any there (a job given twice may have been elsewhere)
            w = out.get(job.id, 0)
        if w == 0 or not job.elastic:
            continue  # waiting, or FIXED (the default)
        if c.speed is None:
            notes[job.id] = note(NO_MODEL, w)
            continue
        if w >= job.max_gpus:  # no step left: no chain to look up or walk
            full.append(c)
            full_at.append(w)
            continue
        chain = chains.of(c, w)
        of.append(chain)
        if rows is not None:
            rows.add(len(by_index), c, chain, job.remaining_fraction)
        by_index.append(c)
        if scaled:
            fractions.append(job.remaining_fraction)
    scales = fractions if scaled else None
    if rows is not None:
        later = batched.walk(by_index, of, free, per_epoch, out, scales, chains, rows)
    else:
        later = walk(by_index, of, free, step, per_epoch, out, scales, chains.window)
    return Growth(out, notes, _AtMax(full, full_at, per_epoch, later) if full else later)
