"""The share stage: time-slice waiting jobs onto busy GPUs, Gandiva-style.

A cluster that is full makes a newcomer wait for whole jobs to end; with
heavy-tailed job lengths the short ones wait behind long ones. Gandiva's
answer is to let several jobs of one size reside on the same GPUs and take
turns in quanta: the job whose turn ends is suspended at a minibatch
boundary with its state in host memory, and resumed later on the same GPUs
in a fraction of a second instead of a checkpoint-restart.

``TimeSlice`` is that mechanism as a stage of a ``Policy``: after order,
size and place have said who holds GPUs, it

1. keeps each time-sliced *group* (GPUs and the jobs resident on them) whose
   GPUs the plan gave to one of its residents, at that size; every other
   resident the plan left waiting stays suspended there;
2. admits jobs the plan left waiting, in the order stage's order, to the
   least crowded group of their start size (at most ``max_residents`` each);
3. rotates each group: the job holding the GPUs keeps them to the first
   quantum boundary after it has had half a quantum, then the resident that
   has waited longest takes over (``rotation``).

The plan itself stays in charge of who holds GPUs: a resident the plan
places elsewhere leaves its group (GPUs came free), and a group whose GPUs
the plan gives to someone else dissolves, its residents waiting again. Only
jobs at their start size host or join a group, so a grown elastic job is
never shared.

With ``packing``, a one-GPU group's runner may have a second resident run
beside it — on trial first, then only where the pair's measured progress
beats taking turns (``policy.packing``, Gandiva's introspection). Gandiva's
own placement and grow-shrink are in ``policy.sharing``, which shares
``rotation``, ``queue_turns`` and ``Packing`` with this.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ringleader.policy.model.plan import WAIT, Assignment, Deferred, Turn
from ringleader.policy.model.views import ClusterView, Device, JobView
from ringleader.policy.place.fewest_nodes import nodes_spanned
from ringleader.policy.share.packing import Packing
from ringleader.policy.share.stage import Shared
from ringleader.policy.size.allocators import least_size

DEFAULT_QUANTUM_S = 60.0


def boundary_after(now: float, quantum_s: float) -> float:
    """The first quantum boundary after ``now``: quanta are aligned to the clock, so
    every group turns over at the same instants and a cluster of hundreds of groups
    needs one decision per quantum, not one per group."""
    return (math.floor(now / quantum_s + 1e-9) + 1) * quantum_s


def rotation(
    residents: Sequence[JobView], now: float, quantum_s: float, top: int | None = None
) -> JobView:
    """Who of a group's residents runs now (``top``: their highest priority, if known).

    Among the group's highest-priority jobs, the one holding the GPUs keeps
    them until a boundary before which it had held them at least half a
    quantum; then the job that has waited longest (never-run jobs first)
    takes over. Decisions between boundaries change nothing. Where a partner
    is packed beside the holder, two run: the holder is the one whose turn
    began last, for the partner may have run for quanta beside one holder
    after another, and taken for the holder it would hand the turn on at
    every decision.
    """
    if len(residents) == 1:
        return residents[0]
    q = quantum_s
    if top is None:
        top = top_priority(residents)
    # One pass over the group (asked of every group at every decision): the holder,
    # the last running eligible job by (state_since, id); the next, the first
    # waiting one by (held GPUs before, state_since, id), else the first of all.
    holder: JobView | None = None
    waiter: JobView | None = None
    anyone: JobView | None = None
    eligible = 0
    for j in residents:
        if j.priority != top:
            continue
        eligible += 1
        if anyone is None or _waited_longer(j, anyone):
            anyone = j
        if j.running:
            if holder is None or _since_before(holder, j):
                holder = j
        elif waiter is None or _waited_longer(j, waiter):
            waiter = j
    last = boundary_after(now, q) - q
    if holder is not None and (holder.state_since > last - q / 2 or eligible == 1):
        return holder
    chosen = waiter if waiter is not None else anyone
    assert chosen is not None  # the top priority is some resident's
    return chosen


def top_priority(residents: Sequence[JobView]) -> int:
    """The highest priority among a group's ``residents`` (there is one at least): a
    loop, not ``max`` over a generator (docs/scale.md, "The compiled hot path")."""
    best = residents[0].priority
    for j in residents:
        if j.priority > best:
            best = j.priority
    return best


def _waited_longer(a: JobView, b: JobView) -> bool:
    """``a`` before ``b`` in turn: never-run jobs first, then the longest waiting.

    ``(a.workers > 0, a.state_since, a.id) < (b.workers > 0, ...)``, compared field by
    field, with no key tuples: ``rotation`` asks it of every time-sliced group at every
    decision."""
    ran = a.workers > 0
    if ran != (b.workers > 0):
        return not ran
    return _since_before(a, b)


def _since_before(a: JobView, b: JobView) -> bool:
    """``(a.state_since, a.id) < (b.state_since, b.id)``, as tuples compare."""
    if a.state_since != b.state_since:
        return a.state_since < b.state_since
    return a.id < b.id


def queue_turns(
    residents: Sequence[JobView], ids_running: set[str], now: float, quantum_s: float
) -> dict[str, Turn]:
    """When each suspended resident of one group should run next, as ``rotation``
    will turn the group over.

    The job running now keeps the GPUs to the first boundary at least half a
    quantum after it started (now, if it starts at this decision); then the
    group's top-priority jobs take a quantum each, longest waiting first, and
    a job whose turn ends goes to the back. Jobs below the group's top
    priority get no turn while a higher one is resident.
    """
    top = top_priority(residents)
    eligible = [j for j in residents if j.priority == top]
    holders = [j for j in eligible if j.id in ids_running]
    waiting = [j for j in eligible if j.id not in ids_running]
    if not holders or not waiting:
        return {}
    q = quantum_s
    since = min(j.state_since if j.running else now for j in holders)
    first = max(boundary_after(now, q), math.ceil((since + q / 2) / q - 1e-9) * q)
    # Suspended now, a job that was running has waited since now.
    order = sorted(waiting, key=lambda j: (now if j.running else j.state_since, j.id))
    return {j.id: Turn(first + k * q, k + 1, q) for k, j in enumerate(order)}


Key = tuple[Device, ...]


@dataclass(frozen=True, slots=True)
class TimeSlice:
    """Time-slicing as a ``Policy`` stage (this module's docstring)."""

    quantum_s: float = DEFAULT_QUANTUM_S
    max_residents: int = 4
    """Jobs per group: suspended jobs wait in host memory, which is finite."""
    after_gpu_s: float = 0.0
    """Only jobs that have attained this much service (GPU-seconds) host or join a group."""
    effective: bool = False
    """Count service as ``LeastAttained(effective=True)`` does, in the job's best GPU
    type's terms, so the queue that takes turns is the order stage's last one."""
    packing: Packing | None = None
    """Pack a second resident beside a one-GPU group's runner where measurement says
    the pair beats taking turns (``policy.packing``); None: turns only."""

    def _shares(self, job: JobView) -> bool:
        got = job.attained_gpu_s
        if self.effective and job.attained_effective_s is not None:
            got = job.attained_effective_s
        return got >= self.after_gpu_s

    def __post_init__(self) -> None:
        if not self.quantum_s > 0:
            raise ValueError(f"quantum_s must be positive, got {self.quantum_s}")
        if self.max_residents < 1:
            raise ValueError(f"max_residents must be at least 1, got {self.max_residents}")

    @property
    def packs(self) -> bool:
        return self.packing is not None

    def share(
        self,
        assignments: Mapping[str, Assignment],
        ordered: Sequence[JobView],
        cluster: ClusterView,
        now: float,
    ) -> Shared:
        """``ordered``: every job in the snapshot, in the order stage's order."""
        if not any(
            job.suspended or (self._shares(job) and not assignments.get(job.id, WAIT).resident)
            for job in ordered
        ):
            return Shared(assignments, None, {})  # no group, and no one to join one
        out = dict(assignments)
        groups = self._hosts(out, ordered)
        grouped = {j.id for members in groups.values() for j in members}
        self._keep_residents(groups, grouped, out, ordered)
        if self.max_residents > 1:
            self._admit(groups, grouped, out, ordered, cluster)
        q = self.quantum_s
        wake = boundary_after(now, q)
        sliced: list[tuple[list[JobView], set[str]]] = []
        memory = cluster.node_memory
        for key, members in groups.items():
            if len(members) < 2:
                continue
            runner = rotation(members, now, q)
            runs = {runner.id}
            if self.packing is not None and len(key) == 1:
                # A trial is judged at the first decision after its window: at the
                # latest the next quantum boundary, when every group turns over
                # anyway (a wake per trial's end cost 1.6x the decisions' time).
                partner, _ = self.packing.partner(runner, members, now, memory[key[0].node])
                if partner is not None:
                    runs.add(partner.id)
            for job in members:
                out[job.id] = Assignment(key, len(key), job.id not in runs)
            sliced.append((members, runs))
        if not sliced:
            return Shared(out, None, {})
        turns = Deferred(
            lambda: {
                k: t
                for members, ids in sliced
                for k, t in queue_turns(members, ids, now, q).items()
            }
        )
        return Shared(out, wake, turns)

    def _hosts(
        self, out: Mapping[str, Assignment], ordered: Sequence[JobView]
    ) -> dict[Key, list[JobView]]:
        """Every job the plan runs at its start size, on exactly the GPUs it uses."""
        groups: dict[Key, list[JobView]] = {}
        for job in ordered:
            a = out.get(job.id)
            if a is None or not a.running or a.workers != len(a.devices):
                continue
            if a.workers == least_size(job) and self._shares(job):
                groups[tuple(sorted(a.devices))] = [job]
        return groups

    def _keep_residents(
        self,
        groups: dict[Key, list[JobView]],
        grouped: set[str],
        out: Mapping[str, Assignment],
        ordered: Sequence[JobView],
    ) -> None:
        """Residents the plan left waiting stay on GPUs that went to one of their group."""
        resident: dict[Key, list[JobView]] = {}
        for job in ordered:
            if job.workers:
                resident.setdefault(tuple(sorted(job.devices[: job.workers])), []).append(job)
        for key, members in resident.items():
            group = groups.get(key)
            if len(members) < 2 or group is None or group[0] not in members:
                continue  # not time-sliced, or dissolved: the plan gave its GPUs away
            for job in members:
                if job is group[0] or out.get(job.id, WAIT).resident:
                    continue
                if len(group) < self.max_residents and least_size(job) == len(key):
                    group.append(job)
                    grouped.add(job.id)

    def _admit(
        self,
        groups: dict[Key, list[JobView]],
        grouped: set[str],
        out: Mapping[str, Assignment],
        ordered: Sequence[JobView],
        cluster: ClusterView,
    ) -> None:
        """Each job the plan left waiting joins the least crowded group of its start size.

        Groups with room wait in a heap per size, least crowded first (then
        fewest nodes); an entry whose count is stale is dropped when it surfaces.
        """
        heaps: dict[int, list[tuple[int, int, Key]]] = {}
        for k, residents in groups.items():
            if len(residents) < self.max_residents:
                heaps.setdefault(len(k), []).append((len(residents), nodes_spanned(k), k))
        for entries in heaps.values():
            heapq.heapify(entries)
        for job in ordered:
            if job.id in grouped or out.get(job.id, WAIT).resident or not self._shares(job):
                continue
            heap = heaps.get(least_size(job))
            if not heap:
                continue
            room = self._room(heap, groups, job, cluster)
            if room is None:
                continue
            key, members = room, groups[room]
            members.append(job)
            grouped.add(job.id)
            if len(members) < self.max_residents:
                heapq.heappush(heap, (len(members), nodes_spanned(key), key))

    def _room(
        self,
        heap: list[tuple[int, int, Key]],
        groups: Mapping[Key, list[JobView]],
        job: JobView,
        cluster: ClusterView,
    ) -> Key | None:
        """The least crowded group in ``heap`` that ``job`` may join, taken off the heap."""
        if job.gpu_types:  # rare: look through every group, keep the heap as it is
            fits = [
                entry
                for entry in heap
                if entry[0] == len(groups[entry[2]])
                and all(job.allows(cluster.type_of(d.node)) for d in entry[2])
            ]
            if not fits:
                return None
            best = min(fits)
            heap.remove(best)
            heapq.heapify(heap)
            return best[2]
        while heap:
            count, _, key = heapq.heappop(heap)
            if count == len(groups[key]):
                return key
        return None
