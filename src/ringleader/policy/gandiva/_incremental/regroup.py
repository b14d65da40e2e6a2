"""Gandiva's groups kept from one decision to the next, changed only where jobs changed.

``groups.current_groups`` finds every group from the GPUs each job holds, reading
every view and making a new ``Group`` per group at every decision, yet from one
event to the next a job or two moves. ``LastGroups`` keeps the groups found,
the views they were found from in the order given, and of each view the devices,
workers and suspended it was read with (a body moves those in place,
``spine.views.placement_view``). A decision walks its views beside the last
ones, comparing objects and those three fields, and takes out and puts in only
the jobs that changed.

The same groups either way: where no job overlaps a group it is not in (a claim
that fails, a group full, a resident of another size), ``current_groups``'s
groups are each job's own GPUs, with residents in one total order
(``groups.resides_before``); a change that would meet an overlap is worked out
afresh. Only the order of the groups in the list differs (here the order they
were founded in), which nothing reads: Gandiva's stack sorts them, or takes a
minimum, by keys no two groups share.
"""

from __future__ import annotations

from collections.abc import Sequence

from ringleader.policy.gandiva._incremental.openings import Changes
from ringleader.policy.gandiva.groups import (
    Group,
    claim,
    current_groups,
    held_by,
    resides_before,
    without,
)
from ringleader.policy.model._incremental.beside import SKIPS, ahead
from ringleader.policy.model.views import Device, JobView


class LastGroups:
    """``current_groups`` across decisions (this module's docstring), and the changes a
    decision makes to the groups it hands out, put back by ``done``."""

    __slots__ = (
        "_codes",
        "_devices",
        "_founded",
        "_held",
        "_ids",
        "_in",
        "_kept",
        "_max",
        "_open",
        "_views",
        "_waiting",
        "changes",
    )

    def __init__(self) -> None:
        self._views: list[JobView] = []
        """The last decision's views, in its order."""
        self._devices: list[tuple[Device, ...]] = []
        """Each view's devices as read then (the object: a body moves a new one in)."""
        self._codes: list[int] = []
        """Each view's workers and suspended as read then (``_code``)."""
        self._in: list[Group | None] = []
        """Each view's group (None: it holds no GPUs and waits)."""
        self._founded: dict[Device, Group] = {}
        """Every group, by its first device, in the order founded."""
        self._held: dict[str, int] = {}
        """The GPUs the groups hold: per node, bit ``i`` for GPU ``i``."""
        self._waiting: dict[str, JobView] = {}
        """The views holding no GPUs, by job id."""
        self._ids: set[str] = set()
        """Every view's job id (given twice: not kept)."""
        self._max = 0
        self._kept = False
        """Whether the above are the groups of ``_views``, with no overlap."""
        self._open = False
        """A decision on the groups handed out is under way (``done`` not yet called)."""
        self.changes = Changes()
        """What the decision under way changed of the groups handed out."""

    def __reduce__(self) -> tuple[type[LastGroups], tuple[()]]:
        return (LastGroups, ())  # what is kept is for the views at hand: none, once pickled

    def current(
        self, jobs: Sequence[JobView], max_residents: int
    ) -> tuple[list[Group], list[JobView], dict[str, int]]:
        """``current_groups(jobs, max_residents)``, as kept: the caller changes the groups
        only through ``changes``, and calls ``done`` once its decision is made. The
        held GPUs are not to be changed."""
        again = self._kept and not self._open and max_residents == self._max
        self._open = True
        if again and self._again(jobs):
            return list(self._founded.values()), list(self._waiting.values()), self._held
        return self._afresh(jobs, max_residents)

    def done(self) -> None:
        """The decision is made: the groups it changed are put back as found."""
        self.changes.undo()
        self._open = False

    def _afresh(
        self, jobs: Sequence[JobView], max_residents: int
    ) -> tuple[list[Group], list[JobView], dict[str, int]]:
        """``current_groups`` itself, kept for the next decision where nothing overlaps."""
        self._kept = False
        self.changes = Changes()  # (a decision that ended half-way changed groups not kept)
        walk = list(jobs)
        where: list[Group | None] = []
        groups, waiting, held = current_groups(walk, max_residents, where)
        self._max = max_residents
        waits: dict[str, JobView] = {}
        for job in waiting:
            if job.workers or job.id in waits:
                return groups, waiting, held  # overlaps, or an id given twice: not kept
            waits[job.id] = job
        devices: list[tuple[Device, ...]] = []
        codes: list[int] = []
        ids: set[str] = set()
        for job in walk:  # (one pass: each view read is a trip to memory)
            devices.append(job.devices)
            codes.append(_code(job))
            ids.add(job.id)
        if len(ids) != len(walk):
            return groups, waiting, held
        self._views, self._devices, self._codes, self._in = walk, devices, codes, where
        self._founded = {g.devices[0]: g for g in groups}
        self._held = held
        self._waiting = waits
        self._ids = ids
        self._kept = True
        return groups, waiting, held

    def _again(self, jobs: Sequence[JobView]) -> bool:
        """The kept groups changed where ``jobs`` changed; False where they are to be
        found afresh (an overlap, or too many jobs new or moved to be worth it), the
        kept ones then spoilt."""
        self._kept = False  # (until this is through)
        views, devices, codes, where = self._views, self._devices, self._codes, self._in
        gone: list[tuple[JobView, Group | None]] = []
        """Views that left their place, with the group each was in."""
        came: list[int] = []
        """The places of views to put in a group, or to wait."""
        turned: list[tuple[JobView, int]] = []
        """Jobs on the same GPUs as before, suspended or resumed (a quantum boundary turns
        thousands), with the view they had (at their place): each stays in its group,
        only its place there moves."""
        limit = len(views) // 2 + SKIPS
        i = 0
        for job in jobs:
            if i >= len(views) or views[i] is not job:
                k = ahead(views, i, job)
                if k < 0:  # a new job: its view goes in here
                    views.insert(i, job)
                    devices.insert(i, job.devices)
                    codes.insert(i, _code(job))
                    where.insert(i, None)
                    came.append(i)
                    i += 1
                    continue
                if k > i:
                    for p in range(i, k):  # the views passed over: their jobs left
                        gone.append((views[p], where[p]))
                    del views[i:k], devices[i:k], codes[i:k], where[i:k]
            code = _code(job)
            if views[i] is not job or job.devices is not devices[i] or code != codes[i]:
                # (a plan hands each resident of a group the group's devices: equal to the
                # resident's own, not always the same object)
                if (
                    code > 1
                    and code >> 1 == codes[i] >> 1
                    and (job.devices is devices[i] or job.devices == devices[i])
                ):
                    turned.append((views[i], i))
                else:
                    gone.append((views[i], where[i]))
                    came.append(i)
                    if len(came) > limit:
                        return False
                views[i] = job
                devices[i] = job.devices
                codes[i] = code
            i += 1
        for p in range(i, len(views)):
            gone.append((views[p], where[p]))
        del views[i:], devices[i:], codes[i:], where[i:]
        for view, g in gone:  # first, so a job that moved leaves before it comes
            if not self._leave(view, g):
                return False
        # Every turned job is taken out before any goes back in, so each goes in among
        # residents whose places stand (a view moved in place is out of its place).
        for was, p in turned:
            g = where[p]
            if g is None or not _lift(g, was):
                return False
        for _, p in turned:
            g = where[p]
            assert g is not None
            if not self._admitted(g, _inserted(g.residents, views[p])):
                return False
        for p in came:
            if not self._join(views[p], p):
                return False
        self._kept = True
        return True

    def _leave(self, view: JobView, g: Group | None) -> bool:
        self._ids.discard(view.id)
        if g is None:  # held no GPUs
            if self._waiting.get(view.id) is not view:
                return False
            del self._waiting[view.id]
            return True
        if not _lift(g, view):
            return False
        if not g.residents:
            del self._founded[g.devices[0]]
            _release(g.devices, self._held)
        return True

    def _join(self, job: JobView, p: int) -> bool:
        """``job`` (at place ``p``) waiting, or in the group on its GPUs, founded if none
        is; False where it overlaps a group or its id is another view's (then ``_again``
        gives up)."""
        if job.id in self._ids:
            return False
        self._ids.add(job.id)
        if not job.workers:
            self._waiting[job.id] = job
            self._in[p] = None
            return True
        mine = held_by(job)
        first = mine.devices[0]
        g = self._founded.get(first)
        if g is None:
            g = claim(mine, self._held)
            if g is None:
                return False
            g.residents.append(job)
            self._founded[first] = g
        elif g.devices != mine.devices or not self._admitted(g, _inserted(g.residents, job)):
            return False
        self._in[p] = g
        return True

    def _admitted(self, g: Group, residents: list[JobView]) -> bool:
        """``g`` with ``residents`` (in their order) if ``current_groups`` would admit each;
        False where one would wait (then ``_again`` gives up)."""
        if len(residents) > self._max:
            return False
        size = g.size
        for k in range(1, len(residents)):
            if residents[k].requested_gpus != size:
                return False
        g.residents = residents
        return True


def _lift(g: Group, view: JobView) -> bool:
    """``view`` taken out of ``g``'s residents; False where it is not there."""
    residents = without(g.residents, view)
    if len(residents) == len(g.residents):
        return False
    g.residents = residents
    return True


def _code(job: JobView) -> int:
    """What of a view, beside its devices, says where it is in the groups."""
    return 2 * job.workers + (1 if job.suspended else 0)


def _inserted(residents: list[JobView], job: JobView) -> list[JobView]:
    """A new list: ``residents`` with ``job`` where ``current_groups`` puts it
    (``resides_before``)."""
    k = 0
    while k < len(residents) and resides_before(residents[k], job):
        k += 1
    return [*residents[:k], job, *residents[k:]]


def _release(devices: tuple[Device, ...], held: dict[str, int]) -> None:
    """The bits of ``devices`` cleared from ``held``; a node with none left dropped."""
    for d in devices:
        bits = held.get(d.node, 0) & ~(1 << d.index)
        if bits:
            held[d.node] = bits
        else:
            del held[d.node]
