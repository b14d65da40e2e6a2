"""Gandiva's groups with room, indexed, and the changes a decision makes to them.

``Openings`` keeps the groups with room in heaps per size and top priority, so a
job is admitted to the best one without visiting them all; ``Changes`` notes
each group a decision changed, with what it was, so the groups kept across
decisions (``regroup.LastGroups``) are put back as found.
"""

from __future__ import annotations

import heapq

from ringleader.policy.gandiva.groups import Group, top
from ringleader.policy.model.views import Device, JobView
from ringleader.policy.place.fewest_nodes import nodes_spanned

_Entry = tuple[int, int, tuple[Device, ...], int]
"""An opening as a heap holds it: residents, nodes spanned, devices, and the group's
index in ``Openings._groups``."""


class Changes:
    """The groups a decision changed, each with what it was (``Group.was``), to be put
    back (``undo``) once the decision is made.

    Gandiva's stack changes groups as it decides (admits, migrates, rebalances,
    shrinks, grows), and the groups it starts from are kept from one decision to
    the next (``regroup.LastGroups``): what they were found to be from the views.
    So each change first goes through ``change``, which keeps the group's residents
    list, devices and ``one_node`` (the list is never changed in place: ``Group.residents``).
    """

    __slots__ = ("groups",)

    def __init__(self) -> None:
        self.groups: list[Group] = []

    def change(self, g: Group) -> None:
        """Ready ``g`` for a change: what it is now kept."""
        if g.was is None:
            g.was = (g.residents, g.devices, g.one_node)
            self.groups.append(g)

    def undo(self) -> None:
        """Every group changed back to what it was, in the objects found."""
        for g in self.groups:
            was = g.was
            assert was is not None
            g.residents = was[0]
            g.move(was[1], was[2])
            g.was = None
        self.groups = []


class Openings:
    """The groups a job of their size may join, each found as ``min`` over all would.

    A group is open while it has fewer than ``max_residents`` residents and every
    resident asked for exactly its size (a grown group holds more GPUs than its
    one resident asked for; no one joins it). Heaps are per size and per top
    priority, keyed by what ``admit`` compares after the priority test; an entry
    whose group has since changed is dropped when it reaches the head. A size's
    heaps are made when a job of that size first asks, from ``groups`` as it is
    then: a decision after one arrival indexes one size, not all.
    """

    __slots__ = ("_all", "_changes", "_groups", "_heaps", "_max")

    def __init__(self, groups: list[Group], max_residents: int, changes: Changes) -> None:
        self._all = groups
        """The decision's groups: the caller appends to it, and calls ``added``."""
        self._max = max_residents
        self._changes = changes
        """Where a group that takes a resident is noted first."""
        self._groups: list[Group] = []
        """The groups indexed, by the number their heap entries carry."""
        self._heaps: dict[int, dict[int, list[_Entry]]] = {}

    def added(self, g: Group) -> None:
        """Index ``g``, just appended to the groups, if its size is indexed already."""
        by_top = self._heaps.get(g.size)
        if by_top is not None:
            self._index(g, by_top)

    def _of(self, size: int) -> dict[int, list[_Entry]]:
        by_top = self._heaps.get(size)
        if by_top is None:
            by_top = self._heaps[size] = {}
            for g in self._all:
                if g.size == size:
                    self._index(g, by_top, sift=False)
            for heap in by_top.values():
                heapq.heapify(heap)
        return by_top

    def _index(self, g: Group, by_top: dict[int, list[_Entry]], sift: bool = True) -> None:
        residents = g.residents
        if len(residents) >= self._max:
            return
        size = g.size
        for r in residents:
            if r.requested_gpus != size:
                return  # grown past what its resident asked for: closed
        self._groups.append(g)
        self._push(len(self._groups) - 1, by_top, sift)

    def _push(self, i: int, by_top: dict[int, list[_Entry]], sift: bool = True) -> None:
        g = self._groups[i]
        if len(g.residents) >= self._max:
            return
        entry = (len(g.residents), 1 if g.one_node else nodes_spanned(g.devices), g.devices, i)
        t = top(g)
        heap = by_top.get(t)
        if heap is None:
            heap = by_top[t] = []
        if sift:
            heapq.heappush(heap, entry)
        else:
            heap.append(entry)

    def _head(self, t: int, heap: list[_Entry]) -> _Entry | None:
        while heap:
            entry = heap[0]
            g = self._groups[entry[3]]
            if len(g.residents) == entry[0] and top(g) == t:
                return entry
            heapq.heappop(heap)  # the group took a resident since: indexed again then
        return None

    def admit(self, job: JobView) -> bool:
        """``job`` joins the open group of its size that minimises (top ≥ its priority,
        residents, nodes spanned, devices); False if no group of its size is open."""
        by_top = self._of(job.requested_gpus)
        below: _Entry | None = None
        above: _Entry | None = None
        for t, heap in by_top.items():
            head = self._head(t, heap)
            if head is None:
                continue
            if t < job.priority:
                below = head if below is None or head < below else below
            else:
                above = head if above is None or head < above else above
        chosen = below if below is not None else above
        if chosen is None:
            return False
        i = chosen[3]
        g = self._groups[i]
        self._changes.change(g)
        g.residents = [*g.residents, job]
        self._push(i, by_top)  # indexed again as it now is; the old entry is dropped at the head
        return True
