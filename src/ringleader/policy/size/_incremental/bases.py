"""A decision's base sizes, made from the last decision's where jobs kept them.

The size stages' ``base`` (``allocator.fifo_base``, ``backfill_base``) gives
each job, in order, the fewest GPUs it runs on while they fit. From one event
to the next nearly every job is given what it was given before, in the same
order, so ``LastBase`` copies the last decision's counts (one call into C) and
walks its jobs beside the ones given GPUs now: a job given what it had is not
written, one given another count is written where it was, the jobs it had that
were not given GPUs before the next one it had are dropped, and a job it did
not have is added. A job given GPUs out of the last order is dropped where it
was and added again, so a reordered job costs a deletion and an insertion, and
a walk that would drop more than ``MAX_SKIPPED`` jobs at once builds the
counts afresh instead. Outputs are equal to ``fifo_base``'s
(``backfill_base``'s) as mappings; the order of the keys may differ, which no
stage reads: counts are looked up, never walked in order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ringleader.policy.model.objective import Candidate
from ringleader.policy.model.views import JobView
from ringleader.policy.size.steps import Counts

MAX_SKIPPED = 64
"""Jobs of the last order one job given GPUs may skip (each dropped, to be added again if
given GPUs later) before the counts are built afresh: a job moved from the back of a
long order to its front would otherwise drop and add every job between."""


def least_size(job: JobView) -> int:
    """The fewest GPUs ``job`` runs on: its minimum if elastic, else its request.

    What the elastic allocators' ``base`` gives each job in order, and so the
    size time-slicing groups jobs by when GPUs are short."""
    return job.min_gpus if job.elastic else job.requested_gpus


class LastBase:
    """The last decision's base counts, with the jobs given them in its order."""

    __slots__ = ("_counts", "_given", "_given_to", "_ids", "_needs")

    def __init__(self) -> None:
        self._counts: Counts = {}
        self._ids: list[str] = []
        """The jobs in ``_counts``, in the order they were given GPUs."""
        self._needs: list[int] = []
        """Their counts, in that order."""
        self._given: list[int] | None = None
        """The last base's count of each job it was asked about, by place (0: none)."""
        self._given_to: Sequence[Candidate] | None = None
        """The jobs it was asked about."""

    def given(self, jobs: Sequence[Candidate], counts: Counts) -> list[int] | None:
        """Each of ``jobs``' count in ``counts``, by place, where these are the very jobs
        and counts of the last ``base`` (None: they are not): the size stage's growth
        reads them so, not by a look-up per job (``growth.greedy``'s ``sizes``)."""
        if jobs is self._given_to and counts is self._counts:
            return self._given
        return None

    def base(
        self,
        jobs: Sequence[Candidate],
        capacity: int,
        backfill: bool,
        size_of: Callable[[Candidate], int] | None = None,
    ) -> Counts:
        """Each of ``jobs``, in order, given ``size_of(job)`` GPUs (default:
        ``least_size``) while that many are free; past the first that does not fit,
        none (``backfill``: those that still fit)."""
        ids, needs, last = self._ids, self._needs, self._counts
        n = len(ids)
        # The counts are handed out: one changed since (it should not be) is not used.
        out = last.copy() if len(last) == n else {}
        if not out:
            n = 0
        new_ids: list[str] = []
        new_needs: list[int] = []
        at = 0
        """Where the walk is in the last order: every job before it was given GPUs again
        or dropped."""
        run = 0
        """Where the run of jobs given what they had, in the last order, up to ``at``
        began: copied into the new order in one slice when the run ends, not per job."""
        free = capacity
        self._counts, self._ids, self._needs = {}, [], []  # until this one is through
        self._given, self._given_to = None, None
        given = [0] * len(jobs)
        place = -1
        for c in jobs:
            place += 1
            job = c.job
            # The default called directly (docs/scale.md, "The compiled hot path").
            need = least_size(job) if size_of is None else size_of(c)
            if need > free:
                if backfill:
                    continue
                break
            free -= need
            given[place] = need
            job_id = job.id
            if at < n and ids[at] == job_id and needs[at] == need:
                at += 1  # as it was, where it was: nothing to write
                continue
            if at > run:
                new_ids += ids[run:at]
                new_needs += needs[run:at]
            if at < n and ids[at] == job_id:
                out[job_id] = need  # another count
                at += 1
            elif job_id not in out:
                out[job_id] = need  # new, or dropped as skipped: given GPUs again
            else:
                found = at
                while found < n and ids[found] != job_id:
                    found += 1
                if found == n or found - at > MAX_SKIPPED:
                    # A job given GPUs twice (it was before ``at``), or too far ahead.
                    return self._afresh(jobs, capacity, backfill, size_of)
                for k in range(at, found):
                    del out[ids[k]]  # skipped: not given GPUs (yet)
                if needs[found] != need:
                    out[job_id] = need
                at = found + 1
            new_ids.append(job_id)
            new_needs.append(need)
            run = at
        for k in range(at, n):
            del out[ids[k]]  # after the last job given GPUs again: not given any now
        if not new_ids and at == n:
            new_ids, new_needs = ids, needs  # every job as it was (the lists are never changed)
        elif at > run:
            new_ids += ids[run:at]
            new_needs += needs[run:at]
        self._counts, self._ids, self._needs = out, new_ids, new_needs
        self._given, self._given_to = given, jobs
        return out

    def _afresh(
        self,
        jobs: Sequence[Candidate],
        capacity: int,
        backfill: bool,
        size_of: Callable[[Candidate], int] | None,
    ) -> Counts:
        """The counts built from nothing, kept for the next decision with their jobs in
        the dictionary's order (a job given twice once, where first given: the next walk
        meets it twice again and builds afresh)."""
        counts = fresh_base(jobs, capacity, backfill, size_of)
        self._counts, self._ids, self._needs = counts, list(counts), list(counts.values())
        return counts


def fresh_base(
    jobs: Sequence[Candidate],
    capacity: int,
    backfill: bool,
    size_of: Callable[[Candidate], int] | None = None,
) -> Counts:
    """Each of ``jobs``, in order, given ``size_of(job)`` GPUs (default: ``least_size``)
    while that many are free; past the first that does not fit, none (``backfill``: those
    that still fit). Built from nothing (``allocator.fifo_base``, ``backfill_base``)."""
    counts: Counts = {}
    free = capacity
    for c in jobs:
        # The default called directly (docs/scale.md, "The compiled hot path").
        need = least_size(c.job) if size_of is None else size_of(c)
        if need > free:
            if backfill:
                continue
            break
        counts[c.job.id] = need
        free -= need
    return counts
