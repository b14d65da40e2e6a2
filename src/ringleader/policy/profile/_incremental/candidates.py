"""The candidates a profile stage made, kept on the views they were made from."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import cast

from ringleader.policy.model.objective import Candidate
from ringleader.policy.model.views import JobView, memo_of


class LastCandidates:
    """The candidates the last split made, each kept on the view it was made from.

    A candidate is a function of its view's speed model and observations (the
    step time at each size, not for how long), and it reads the job's progress
    from the view itself. A view is the same object from one decision to the
    next while only its progress, its placement and how long it has run at each
    size change: the simulator keeps each job's and moves those on in place
    (``spine.views.progress_view``, ``placement_view``), and builds a new one
    when a step time changes; the runtime keeps a view until its stored row
    changes (``spine.views``: a view stands for one set of step times). So a
    split takes the last one's candidate for the very same view instead of
    building it, with its prior and its memoised curve, again (docs/scale.md,
    "Candidates kept"). Outputs are unchanged.

    The candidate hangs from the view (``views.Memo``), marked as this memo's, not
    in a dictionary by job id (docs/scale.md, "Views the bodies keep, and the memo
    on each view"). A candidate lives as long as its view; a new view of the job, built
    by the body, starts without one.
    """

    __slots__ = ()

    def split(
        self, jobs: Sequence[JobView], make: Callable[[JobView], Candidate]
    ) -> list[Candidate]:
        """``make(job)`` for each of ``jobs``, or the candidate made for the same view."""
        known = []
        for job in jobs:
            c = self.kept(job)
            if c is None:
                c = make(job)
                self.keep(job, c)
            known.append(c)
        return known

    def kept(self, job: JobView) -> Candidate | None:
        """The candidate made for this very view, if this memo made one (None: it was
        made for another view of the job, by another memo, or never)."""
        memo = job.memo
        if memo is None:
            return None
        return cast("Candidate | None", memo.get(self))

    def keep(self, job: JobView, c: Candidate) -> None:
        """Remember ``c`` as made for this very view."""
        memo_of(job)[self] = c
