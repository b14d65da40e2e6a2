"""Gandiva's groups: finding them from where jobs are, and the index that admits a
job to one without visiting them all.

A *group* is a set of GPUs and the gang jobs resident on it, all of that set's
size; one runs at a time, the others wait suspended (``ringleader.policy.gandiva.sharing``).
A job that finds no free GPUs joins the group of its size where it is most
likely to run: one whose top priority is below its own if any, then the least
crowded, then the one on fewest nodes, then by devices (which are unique, so
the choice is total). Asking that of every group for every job made a burst
of arrivals at a full cluster quadratic, so ``Openings`` keeps the groups with
room in heaps per size and top priority, and each admission looks at one heap
head per priority level.
``current_groups`` finds the groups from the GPUs each job holds, with no state
carried from one decision to the next; ``regroup.LastGroups`` keeps them from one
decision to the next, and a decision that changes a group first notes what it was
(``Changes``), so they are put back as found.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from ringleader.policy.model.arrival import arrives_before
from ringleader.policy.model.views import Device, JobView, memo_of
from ringleader.policy.share.timeslice import top_priority

_HELD = "held GPUs"
"""The slot of a view's memo where ``held_by`` keeps the job's ``Held``."""

NO_PRIORITY = -(2**31)
"""The top priority of a group with no residents: below every job's."""


class Group:
    """GPUs shared over time by gang jobs of their size (the module docstring).

    A plain class, not a dataclass: Gandiva's stack makes one per group at every
    decision (docs/scale.md, "The compiled hot path").
    """

    __slots__ = ("_top", "_top_of", "devices", "one_node", "residents", "size", "was")

    def __init__(
        self,
        devices: tuple[Device, ...],
        residents: list[JobView] | None = None,
        one_node: bool = False,
    ) -> None:
        self.devices = devices
        """Its GPUs, sorted; moved with ``move`` only, which keeps ``size`` with them."""
        self.size = len(devices)
        """How many GPUs (a group's size is read of every group at every decision, and
        ``len`` of the devices went to another object for it)."""
        self.residents: list[JobView] = [] if residents is None else residents
        """Never changed in place: a change hands the group a new list (``without``, or
        one more at the end), so what is worked out from one list (``top``) stands while
        it is the group's, and a plan's deferred turns read the lists it was made from."""
        self.one_node = one_node
        """Known to be on one node (False: not known), as ``current_groups`` finds most,
        which Gandiva's stack reads of every group (``sharing.on_one_node``) without
        visiting each device. Every move of a group keeps it so: to a subset of its
        GPUs, a doubling on its node, or onto one node."""
        self._top = NO_PRIORITY
        self._top_of: list[JobView] | None = None
        """The residents list ``_top`` was worked out from (``top``)."""
        self.was: tuple[list[JobView], tuple[Device, ...], bool] | None = None
        """Its residents, devices and ``one_node`` before this decision changed it
        (``Changes``); None: unchanged."""

    def __repr__(self) -> str:
        return f"Group(devices={self.devices!r}, residents={[j.id for j in self.residents]!r})"

    def move(self, devices: tuple[Device, ...], one_node: bool) -> None:
        """Onto ``devices`` (``one_node``: known to be on one node)."""
        self.devices = devices
        self.size = len(devices)
        self.one_node = one_node


def top(g: Group) -> int:
    """The highest priority among ``g``'s residents: worked out once per residents list
    (asked of every group at every decision: rotation, rebalancing, admission), as a
    group kept from one decision to the next keeps its list while no resident moves."""
    residents = g.residents
    if g._top_of is not residents:
        g._top = top_priority(residents) if residents else NO_PRIORITY
        g._top_of = residents
    return g._top


def without(residents: list[JobView], job: JobView) -> list[JobView]:
    """A new list: ``residents`` but ``job`` (the very view)."""
    return [r for r in residents if r is not job]


def turn_order(job: JobView) -> tuple[int, float, str]:
    """The order jobs take turns and places in: higher priority, then earlier arrival."""
    return (-job.priority, job.submitted_at, job.id)


def current_groups(
    jobs: Sequence[JobView],
    max_residents: int,
    where: list[Group | None] | None = None,
) -> tuple[list[Group], list[JobView], dict[str, int]]:
    """The groups as jobs are now, those left waiting, and the GPUs held (per node, a
    bitmask: bit ``i`` for GPU ``i``): at most ``max_residents`` a group; jobs on GPUs
    claimed twice wait, to be placed again. ``where``, if given, is filled with each
    job's group, by its place in ``jobs`` (None: it waits).

    A job joins the group founded on its first GPU if that group holds exactly its
    GPUs: no other could (a group is founded only on GPUs nobody holds yet), so no
    dictionary keyed by device tuples (hashed a call per device) is needed. A job on
    a GPU some group holds other than as its first finds no group there, and its
    claim fails (``claim``).
    """
    walk = jobs if isinstance(jobs, list) else list(jobs)
    if where is not None:
        where[:] = [None] * len(walk)
    founded: dict[Device, Group] = {}
    held: dict[str, int] = {}
    groups: list[Group] = []
    waiting: list[JobView] = []
    for p in _resident_order(walk):
        job = walk[p]
        if not job.workers:
            waiting.append(job)
            continue
        mine = held_by(job)
        devices = mine.devices
        first = devices[0]
        group = founded.get(first)
        if group is None:
            group = claim(mine, held)
            if group is None:
                waiting.append(job)  # its GPUs overlap another group's
                continue
            founded[first] = group
            groups.append(group)
        elif group.devices != devices:
            waiting.append(job)  # its GPUs overlap another group's
            continue
        if len(group.residents) >= max_residents or (
            group.residents and job.requested_gpus != group.size
        ):
            waiting.append(job)
            continue
        group.residents.append(job)
        if where is not None:
            where[p] = group
    return groups, waiting, held


def _resident_order(jobs: list[JobView]) -> list[int]:
    """The places in ``jobs`` sorted by their jobs' (not running, not suspended,
    ``turn_order``), as ``sorted`` would.

    Split by the first two (stably, in ``jobs``' order), then each part sorted by
    ``turn_order`` unless it is in that order already, which it is when the jobs come in
    submission order and share one priority (usually), so no key tuple is built per job.
    """
    parts: list[list[int]] = [[], [], [], []]
    for p in range(len(jobs)):
        job = jobs[p]
        parts[(0 if job.workers else 2) + (0 if job.suspended else 1)].append(p)
    ordered: list[int] = []
    for part in parts:
        # As timsort finds a run: in order unless some job's key is less than the one
        # before it (compared field by field, with no key tuple).
        for i in range(1, len(part)):
            if turn_before(jobs[part[i]], jobs[part[i - 1]]):
                part = sorted(part, key=lambda p: turn_order(jobs[p]))
                break
        ordered.extend(part)
    return ordered


def resides_before(a: JobView, b: JobView) -> bool:
    """Whether ``a`` comes before ``b`` among a group's residents (both hold GPUs): in
    ``_resident_order``'s order, suspended first, then by ``turn_order``."""
    if a.suspended != b.suspended:
        return a.suspended
    return turn_before(a, b)


def turn_before(a: JobView, b: JobView) -> bool:
    """``turn_order(a) < turn_order(b)``, without building either."""
    if a.priority != b.priority:
        return a.priority > b.priority
    return arrives_before(a, b)


def claim(mine: Held, held: dict[str, int]) -> Group | None:
    """A new group on a job's GPUs (``mine``), marked held; None if any is held already.

    A node's held GPUs are one integer's bits, so a gang on one node (most: a whole
    node's eight GPUs, or four) is checked and claimed with one look-up of its node,
    by the mask ``Held`` worked out with the sorted devices, not by a look-up and an
    insertion per GPU.
    """
    if not mine.node:
        return _claim_spread(mine.devices, held)
    bits = held.get(mine.node, 0)
    if bits & mine.mask:
        return None
    held[mine.node] = bits | mine.mask
    return Group(mine.devices, None, True)


def _claim_spread(devices: tuple[Device, ...], held: dict[str, int]) -> Group | None:
    """``claim`` for a gang over more than one node: a mask per node it is on.

    ``devices`` are sorted (``_held``), so each node's are together: a mask is made
    per run of one node's devices, not by a look-up per device. (Were a node's apart,
    it would take two masks, checked and claimed in turn: the same claim.)
    """
    nodes: list[str] = []
    masks: list[int] = []
    node = devices[0].node
    mask = 0
    for d in devices:
        if d.node != node:
            nodes.append(node)
            masks.append(mask)
            node, mask = d.node, 0
        mask |= 1 << d.index
    nodes.append(node)
    masks.append(mask)
    for i in range(len(nodes)):
        if held.get(nodes[i], 0) & masks[i]:
            return None
    for i in range(len(nodes)):
        held[nodes[i]] = held.get(nodes[i], 0) | masks[i]
    return Group(devices)


class Held:
    """The GPUs a job runs on, sorted (``_held``), and, where they are on one node, that
    node and their bits (the mask ``claim`` claims): kept on the view (``views.Memo``) with
    the devices and workers they were read from, as both may change in place: else
    sorting and masking would read every device object of every job at every decision."""

    __slots__ = ("devices", "mask", "node", "of", "workers")

    def __init__(self, job: JobView) -> None:
        self.of = job.devices
        self.workers = job.workers
        self.devices = _held(job)
        self.node = ""
        """The one node they are on ("" where they span more, or are none)."""
        self.mask = 0
        if self.devices:
            node = self.devices[0].node
            mask = 0
            for d in self.devices:
                if d.node != node:
                    return
                mask |= 1 << d.index
            self.node, self.mask = node, mask


def held_by(job: JobView) -> Held:
    """``Held`` for ``job`` as its view is now: the one kept on it, or made and kept."""
    memo = memo_of(job)
    kept = cast("Held | None", memo.get(_HELD))
    if kept is not None and kept.of is job.devices and kept.workers == job.workers:
        return kept
    made = Held(job)
    memo[_HELD] = made
    return made


def _held(job: JobView) -> tuple[Device, ...]:
    """The devices ``job`` runs on, sorted (``()``: it runs on none)."""
    if not job.workers:
        return ()
    devices = job.devices[: job.workers]
    # Field by field, nodes first for equality: ``<`` on two devices, or on two node
    # names, goes through Python's generic comparison, a call per pair (a gang of
    # eight on one node has seven pairs), asked of every job at every decision.
    for i in range(1, len(devices)):
        a, b = devices[i], devices[i - 1]
        if a.node == b.node:
            if a.index < b.index:
                return tuple(sorted(devices))
        elif a.node < b.node:
            return tuple(sorted(devices))
    return devices
