"""The notes of a walk over kept chains: why each walked job stopped, worked out when asked."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ringleader.policy.model.objective import Candidate
from ringleader.policy.model.plan import Note, scaled_objectives
from ringleader.policy.size._incremental.chain import Chain
from ringleader.policy.size.steps import (
    outbid,
    scaled_entry,
)

Later = Callable[[], dict[str, Note]]
"""Notes worked out when first asked for (``plan.SizingNotes``)."""


LeadAt = Callable[[int, int], float]
"""The lead of job ``i``'s step ``k`` as walked (``lead_at(i, k)``)."""


class Notes:
    """Where each job walked stopped, as ``plan.Sizing`` notes: worked out when called."""

    __slots__ = (
        "dropped",
        "ends",
        "jobs",
        "lead_at",
        "left",
        "of",
        "per_epoch",
        "refused",
        "rest",
        "scales",
        "taken",
    )

    def __init__(
        self,
        jobs: Sequence[Candidate],
        of: Sequence[Chain],
        ends: list[int],
        taken: list[int],
        dropped: list[tuple[int, int]],
        rest: list[int],
        left: int,
        refused: dict[int, Note],
        per_epoch: bool,
        scales: list[float] | None,
        lead_at: LeadAt,
    ) -> None:
        self.jobs = jobs
        self.of = of
        self.ends = ends
        self.taken = taken
        self.dropped = dropped
        """Jobs outbid for the GPUs left: (job index, GPUs left when its step was weighed)."""
        self.rest = rest
        self.left = left
        """Jobs whose next step was never weighed: outbid with the ``left`` GPUs left."""
        self.refused = refused
        self.per_epoch = per_epoch
        self.scales = scales
        self.lead_at = lead_at
        """Each job's leads as walked (its chain's, or, scaled, worked out for the decision)."""

    def __call__(self) -> dict[str, Note]:
        jobs, of, ends, taken, per_epoch = self.jobs, self.of, self.ends, self.taken, self.per_epoch
        notes: dict[str, Note] = {}
        bar: float | None = None
        """The lowest score of a step taken by a measured job: its lead, negated."""
        scales = self.scales
        for i in range(len(jobs)):
            c, chain, k = jobs[i], of[i], taken[i]
            if k and c.measured:
                worst = -self.lead_at(i, k - 1)
                bar = worst if bar is None else min(bar, worst)
            if k < ends[i]:
                continue  # outbid: below
            if k < len(chain.steps):
                notes[c.job.id] = self.refused[i]
            else:
                assert chain.end is not None  # laid out: worked out to its end
                notes[c.job.id] = (
                    chain.end if scales is None else scaled_objectives(chain.end, scales[i])
                )
        left = self.left
        for i, gpus in [*self.dropped, *((i, left) for i in self.rest)]:
            c = jobs[i]
            entry = of[i].steps[taken[i]]
            if scales is not None:
                entry = scaled_entry(entry, scales[i])
            notes[c.job.id] = outbid(c, entry, per_epoch, gpus, bar)
        return notes
