"""A decision's assignments, made from the last decision's where jobs kept them.

From one event to the next most jobs keep their assignment: the simulator
asks at every event, a controller at every tick. Both the
last decision's dictionary and this one's hold the jobs in submission order
(``stack.fifo``: by submission time, then id, an order no decision changes),
so ``Assigning`` copies the last one (one call into C) and walks it beside
the jobs as they are put: a job it had that kept its assignment is not
written at all, one whose assignment changed is written where it was, the
jobs it had that were not put before the next one it had left and are
dropped, and new jobs come at the end. Where that would not give the
jobs' order (a new job put before one the last decision had, or jobs put out
of the last one's order), the dictionary is built again in the order they
were put. Outputs are equal either way, in the same order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from ringleader.policy.model.plan import WAIT, Assignment
from ringleader.policy.model.views import Device, JobView, memo_of


class LastAssignments:
    """The assignments of the last decision, by job id.

    A running job that keeps its GPUs and size (a resident of Gandiva's stack, its
    place and whether it runs) gets the very object it had (``again``,
    ``Assigning.put``), so a body sees "unchanged" by identity before comparing
    devices, and a decision does not build one per running job again (the
    simulator asks at every event). Outputs are equal either way.
    """

    __slots__ = ("assignments",)

    def __init__(self) -> None:
        self.assignments: dict[str, Assignment] = {}
        """A dict, not any mapping: looked up once per placed job per decision
        (docs/scale.md, "The compiled hot path")."""

    def again(
        self,
        job: JobView,
        devices: tuple[Device, ...],
        workers: int,
        suspended: bool = False,
    ) -> Assignment:
        """``Assignment(devices, workers, suspended)``: the last decision's very object for
        ``job`` where it was that. Asked while the decision builds its own, which
        replaces ``assignments`` once built. The last object is found on the job's view
        (``views.Memo``) where this keeper left it there, else by id: Gandiva's stack
        asks it of every resident at every decision (docs/scale.md, "Views the bodies
        keep, and the memo on each view"). Only identity rides on which is found."""
        memo = job.memo
        a: Assignment | None = None
        if memo is not None:
            a = cast("Assignment | None", memo.get(self))
        if a is None:
            a = self.assignments.get(job.id)
        if (
            a is not None
            and a.workers == workers
            and a.suspended == suspended
            and (a.devices is devices or a.devices == devices)
        ):
            made = a
        else:
            made = Assignment(devices, workers, suspended)
        if memo is None or memo.get(self) is not made:
            memo_of(job)[self] = made
        return made

    def start(self) -> Assigning:
        """A new decision's assignments, to be put job by job in submission order."""
        return Assigning(self.assignments)


class Assigning:
    """One decision's assignments, put job by job in submission order (module docstring)."""

    __slots__ = ("_at", "_fresh", "_keys", "_last", "_out", "_rebuild", "_values")

    def __init__(self, last: dict[str, Assignment]) -> None:
        self._last = last
        self._out = last.copy()
        self._keys = list(last)
        """The last decision's jobs, in its order."""
        self._values = list(last.values())
        """Their assignments."""
        self._at = 0
        """Where the walk beside the jobs put is in ``_keys``: every job before it is put
        or has left."""
        self._fresh = False
        """Whether a job the last decision did not have was put (at the end of ``_out``)."""
        self._rebuild = False
        """Whether ``_out`` is out of the jobs' order: built again in ``done``."""

    def put(self, job_id: str, devices: tuple[Device, ...] | None, workers: int) -> None:
        """``job_id`` runs on ``devices`` with ``workers`` (None: it waits)."""
        keys, at = self._keys, self._at
        prev: Assignment | None
        if at < len(keys) and keys[at] == job_id and not self._rebuild:
            prev = self._values[at]  # next in the last order, as most jobs are: no look-up
        else:
            prev = self._last.get(job_id)
        a: Assignment
        if devices is None:
            a = WAIT  # one shared, immutable: most jobs wait
        elif (
            prev is not None
            and prev.workers == workers
            and not prev.suspended
            and (prev.devices is devices or prev.devices == devices)
        ):
            a = prev  # as it was: the same object
        else:
            a = Assignment(devices, workers)
        out = self._out
        if prev is None:
            out[job_id] = a  # new: at the end
            self._fresh = True
            return
        if self._rebuild:
            out[job_id] = a
            return
        found = at
        while found < len(keys) and keys[found] != job_id:
            found += 1
        if found == len(keys) or self._fresh:
            # Put out of the last decision's order, or after a new job: the walk
            # cannot tell who left, and the order is built again at the end.
            self._rebuild = True
            out[job_id] = a
            return
        for k in range(at, found):
            del out[keys[k]]  # not put before a job after it: it left
        self._at = found + 1
        if a is not prev:
            out[job_id] = a

    def done(self, jobs: Sequence[JobView]) -> dict[str, Assignment]:
        """The assignments of ``jobs``, which were put, each once, in this order."""
        out = self._out
        if self._rebuild:
            return {job.id: out[job.id] for job in jobs}
        keys = self._keys
        for k in range(self._at, len(keys)):
            del out[keys[k]]  # after the last job put that it had: they left
        return out
