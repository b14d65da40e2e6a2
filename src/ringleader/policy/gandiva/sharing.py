"""Gandiva's mechanisms: share GPUs over time and space, and check each move helped.

GPUs are organised in *groups*: a set of GPUs and the gang jobs resident on
it (all of that set's size). One job per group runs at a time; the others are
suspended in host memory and take turns in quanta (time-slicing), so a job
that arrives at a full cluster starts within a quantum instead of queueing.
On top of that, each decision:

* **places** new jobs on free GPUs (fewest nodes), else in the least crowded
  group of their size (at most ``max_residents`` per group), else queues them;
* **migrates** a suspended job from a crowded group to GPUs that came free,
  and a whole group spread over more nodes than it needs onto one that fits;
* **packs** a second single-GPU job beside the running one when their memory
  fits — as a *trial*: once both have run packed for ``trial_window_s`` the
  pair is kept only if their summed progress rate (each job's minibatch time
  alone over its time packed) beat time-slicing them (1.0) by ``keep_gain``;
  otherwise it is reverted and never retried;
* **grows** jobs that opt in (``elastic``) onto idle GPUs when no one waits,
  and shrinks them back to their request as soon as someone does;
* never lets a job run while a higher-priority job of its group is suspended.

Everything it needs is in the snapshot — who is resident where, since when,
measured minibatch times alone and packed with each partner — so the policy
stays a pure function and a restarted controller resumes the same decisions.
Where no group takes turns, nothing it weighs moves with the clock: its plan
is settled (``Plan.settled``).
With every mechanism off it is the no-sharing baseline: exclusive GPUs, first
come first served with backfill.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ringleader.policy.gandiva._incremental.memory import Gandiva
from ringleader.policy.gandiva._incremental.openings import Openings
from ringleader.policy.gandiva.groups import Group, top, turn_order, without
from ringleader.policy.model.memory import Memory, memory_of
from ringleader.policy.model.needs import Needs
from ringleader.policy.model.plan import (
    GROWN_IDLE,
    Assignment,
    Deferred,
    Note,
    Plan,
    SizingNotes,
    Turn,
    note,
)
from ringleader.policy.model.views import ClusterView, Device, JobView
from ringleader.policy.place._incremental.free import FreeGPUs
from ringleader.policy.place._incremental.keeping import keep_subset
from ringleader.policy.place.fewest_nodes import place_one
from ringleader.policy.share.packing import (
    DEFAULT_KEEP_GAIN,
    DEFAULT_TRIAL_WINDOW_S,
    Packing,
    Verdict,
)
from ringleader.policy.share.timeslice import (
    DEFAULT_QUANTUM_S,
    boundary_after,
    queue_turns,
    rotation,
)


@dataclass(frozen=True, slots=True)
class Sharing:
    """The Gandiva stack (see the module docstring); each mechanism can be switched off."""

    name: str = "gandiva"
    time_slicing: bool = True
    packing: bool = True
    migration: bool = True
    grow_shrink: bool = True
    quantum_s: float = DEFAULT_QUANTUM_S
    max_residents: int = 4
    """Jobs per group: suspended jobs wait in host memory, which is finite."""
    trial_window_s: float = DEFAULT_TRIAL_WINDOW_S
    """Packed running time before a trial is judged (at the next quantum boundary)."""
    keep_gain: float = DEFAULT_KEEP_GAIN
    max_migrations: int = 8
    """Per decision, so a burst of moves never stalls the cluster at once."""
    _packer: Packing = field(init=False, repr=False, compare=False)
    memory: Memory[Gandiva] = field(
        default_factory=memory_of(Gandiva), init=False, repr=False, compare=False
    )
    """What the stack keeps between decisions (``model.memory``): the last assignments,
    whose objects a resident whose place did not change gets again; the groups found at
    the last decision, changed where jobs changed (every change this stack makes to one
    goes through ``groups.changes`` and is put back once the decision is made); and every
    GPU free, the blank each decision's free-GPU index starts from."""

    def memories(self) -> dict[str, Memory[Any]]:
        """What this policy keeps between decisions, by part (``model.memory``)."""
        return {"gandiva": self.memory}

    def forget(self) -> None:
        """Drop everything kept between decisions: the next one works it all out afresh."""
        self.memory.forget()

    def __post_init__(self) -> None:
        if self.quantum_s <= 0 or self.trial_window_s <= 0:
            raise ValueError("quantum_s and trial_window_s must be positive")
        if self.max_residents < 1:
            raise ValueError("max_residents must be at least 1")
        # Made once: it judges every one-GPU group at every decision.
        object.__setattr__(self, "_packer", Packing(self.trial_window_s, self.keep_gain))

    @property
    def packer(self) -> Packing:
        """Packing's judgment at this stack's trial window and gain (``policy.packing``)."""
        return self._packer

    def verdict(self, a: JobView, b: JobView) -> Verdict:
        """What introspection knows about packing ``a`` with ``b`` (``Packing.verdict``)."""
        return self.packer.verdict(a, b)

    @property
    def needs(self) -> Needs:
        return Needs(
            time_slicing=self.time_slicing,
            packing=self.packing,
            migration=self.migration,
        )

    def decide(self, jobs: Sequence[JobView], cluster: ClusterView, now: float) -> Plan:
        memory = cluster.node_memory
        found = self.memory.kept.groups
        groups, waiting, held = found.current(jobs, self.max_residents)
        free = FreeGPUs.outside(cluster, held, self.memory.kept.blank)
        if self.grow_shrink and waiting:
            self._shrink(groups, free)
        openings: list[Openings] = []  # made at the first job no free GPUs fit
        queued = False
        for job in sorted(waiting, key=turn_order):
            if not self._admit(job, groups, free, openings):
                queued = True
        if self.migration:
            self._migrate(groups, free)
        if self.time_slicing:
            self._rebalance(groups)
        if self.grow_shrink and not queued and all(len(g.residents) == 1 for g in groups):
            self._grow(groups, free)
        assignments: dict[str, Assignment] = {}
        kept = self.memory.kept.assignments
        notes: dict[str, Note] = {}
        sliced: list[tuple[list[JobView], set[str]]] = []
        wake: float | None = None
        for g in groups:
            if len(g.residents) == 1:  # a lone resident runs, with no turns to work out
                job = g.residents[0]
                assignments[job.id] = kept.again(job, g.devices, g.size)
                if g.size > job.requested_gpus:  # grown; else FIXED
                    notes[job.id] = note(GROWN_IDLE, g.size)
                continue
            running, due = self._turns(g, now, memory)
            if due is not None:
                wake = due if wake is None else min(wake, due)
            for job in g.residents:
                paused = job.id not in running
                assignments[job.id] = kept.again(job, g.devices, g.size, paused)
            if len(g.residents) > len(running):
                sliced.append((g.residents, running))
            elif g.size > g.residents[0].requested_gpus:  # grown: one resident; else FIXED
                notes[g.residents[0].id] = note(GROWN_IDLE, g.size)
        self.memory.kept.assignments.assignments = assignments
        found.done()
        turns = Deferred(lambda: self._queues(sliced, now)) if sliced else {}
        # With no group taking turns (no wake-up asked for) nothing here reads the clock
        # or what it moves on (progress, measured seconds): see ``Plan.settled``.
        settled = wake is None
        return Plan(assignments, wake, SizingNotes(assignments, notes), turns, settled=settled)

    # -- groups ----------------------------------------------------------------
    def _admit(
        self, job: JobView, groups: list[Group], free: FreeGPUs, openings: list[Openings]
    ) -> bool:
        """``job`` onto free GPUs, else into the open group of its size it is likeliest to
        run in soonest (``groups.Openings``), else it stays queued (False)."""
        size = job.requested_gpus
        if free.total >= size:
            g = Group(place_one(job, size, free), [job])
            groups.append(g)
            if openings:
                openings[0].added(g)
            return True
        if not self.time_slicing:
            return False
        if not openings:
            openings.append(Openings(groups, self.max_residents, self.memory.kept.groups.changes))
        return openings[0].admit(job)

    def _rebalance(self, groups: list[Group]) -> None:
        """Move waiting high-priority jobs to groups that run lower-priority ones.

        Without this a job could sit suspended behind an equal-priority peer
        while another GPU runs a lower-priority job: suspended for a lower one.
        Each move raises the receiving group's top priority, so this ends.
        """
        if _one_top(groups):
            return  # no group's top is below a waiting peer's: nowhere to move one to
        for _ in range(len(groups) * self.max_residents):
            # The first job, in ``turn_order``, that waits behind a peer of its group's top
            # priority: in each group that is the second of those peers.
            first: tuple[tuple[int, float, str], JobView, Group] | None = None
            for g in groups:
                if len(g.residents) < 2:
                    continue
                t = top(g)
                peers = sorted((r for r in g.residents if r.priority == t), key=turn_order)
                if len(peers) < 2:
                    continue
                key = turn_order(peers[1])
                if first is None or key < first[0]:
                    first = (key, peers[1], g)
            if first is None:
                return
            _, job, donor = first
            receivers = [
                g for g in groups if g.size == donor.size and g.residents and top(g) < job.priority
            ]
            if not receivers:
                return
            receiver = min(receivers, key=lambda g: (top(g), len(g.residents), g.devices))
            self.memory.kept.groups.changes.change(donor)
            self.memory.kept.groups.changes.change(receiver)
            donor.residents = without(donor.residents, job)
            if len(receiver.residents) >= self.max_residents:
                low = max(receiver.residents, key=turn_order)
                receiver.residents = without(receiver.residents, low)
                donor.residents = [*donor.residents, low]
            receiver.residents = [*receiver.residents, job]

    def _migrate(self, groups: list[Group], free: FreeGPUs) -> None:
        moves = 0
        # Spread out: a suspended job of a crowded group to GPUs that came free. Only
        # crowded groups that fit the GPUs free now are visited: free GPUs only shrink
        # here, so no other group would move (the rest are left out before sorting).
        crowded = [g for g in groups if len(g.residents) > 1 and g.size <= free.total]
        for g in sorted(crowded, key=lambda g: (-len(g.residents), g.devices)):
            while len(g.residents) > 1 and moves < self.max_migrations:
                if free.total < g.size:
                    break
                mover = max(g.residents, key=lambda j: (not j.running, *turn_order(j)))
                target = place_one(mover, g.size, free)
                self.memory.kept.groups.changes.change(g)
                g.residents = without(g.residents, mover)
                groups.append(Group(target, [mover]))
                moves += 1
        # De-fragment: a group on more nodes than it needs, onto one node that fits.
        if moves >= self.max_migrations:
            return
        spread = [g for g in groups if not on_one_node(g)]
        for g in sorted(spread, key=lambda g: (-g.size, g.devices)):
            if moves >= self.max_migrations:
                break
            node = free.best_fit(g.size, set()) if free.total >= g.size else None
            if node is None:
                continue  # only moves onto one node; wider jobs stay where they are
            indices = sorted(free.free[node])[: g.size]
            free.take(node, indices)
            free.give_devices(g.devices)
            self.memory.kept.groups.changes.change(g)
            g.move(tuple(Device(node, i) for i in indices), True)
            moves += 1

    def _shrink(self, groups: list[Group], free: FreeGPUs) -> None:
        for g in groups:
            if len(g.residents) != 1:
                continue
            job = g.residents[0]
            if g.size > job.requested_gpus:
                kept = keep_subset(g.devices, job.requested_gpus)
                free.give_devices(sorted(set(g.devices) - set(kept)))
                self.memory.kept.groups.changes.change(g)
                g.move(kept, g.one_node)

    def _grow(self, groups: list[Group], free: FreeGPUs) -> None:
        # Only the groups that may grow are sorted (usually few or none: most jobs are
        # not elastic), in the order all would be.
        growing = [g for g in groups if g.residents[0].elastic and g.size < g.residents[0].max_gpus]
        for g in sorted(growing, key=lambda g: turn_order(g.residents[0])):
            job = g.residents[0]
            node = g.devices[0].node
            if not on_one_node(g):
                continue
            room = sorted(free.free[node])
            extra = min(len(room), job.max_gpus - g.size, g.size)  # doubling
            if extra < g.size:
                continue
            free.take(node, room[:extra])
            self.memory.kept.groups.changes.change(g)
            grown = g.devices + tuple(Device(node, i) for i in room[:extra])
            g.move(tuple(sorted(grown)), g.one_node)

    # -- who runs this quantum ---------------------------------------------------
    def _turns(
        self, g: Group, now: float, memory: Mapping[str, float]
    ) -> tuple[set[str], float | None]:
        """The ids running in ``g`` (of two residents or more: ``decide`` runs a lone
        one) now, and when the group wants a new decision.

        Who runs is ``timeslice.rotation``'s choice, at quanta aligned to the
        clock; a partner may be packed beside a single-GPU runner.
        """
        q = self.quantum_s
        runner = rotation(g.residents, now, q, top(g))
        due = boundary_after(now, q)
        running = {runner.id}
        if self.packing and g.size == 1:
            partner, trial_ends = self.packer.partner(
                runner, g.residents, now, memory[g.devices[0].node]
            )
            if partner is not None:
                running.add(partner.id)
                if trial_ends is not None and trial_ends > due:
                    due += math.ceil((trial_ends - due) / q) * q
        return running, due

    def _queues(
        self, groups: Sequence[tuple[Sequence[JobView], set[str]]], now: float
    ) -> dict[str, Turn]:
        """When each suspended job should run next (``timeslice.queue_turns``), packing aside.

        ``groups``: each group's residents and the ids running in it now.
        """
        turns: dict[str, Turn] = {}
        for residents, running in groups:
            turns.update(queue_turns(residents, running, now, self.quantum_s))
        return turns


def _one_top(groups: list[Group]) -> bool:
    """Whether every group with residents has the same top priority (usually: every
    job has the default one), without sorting any group's peers."""
    seen: int | None = None
    for g in groups:
        if g.residents:
            t = top(g)
            if seen is None:
                seen = t
            elif t != seen:
                return False
    return True


def on_one_node(g: Group) -> bool:
    """Whether ``g``'s GPUs are on one node: known (``Group.one_node``), or looked at."""
    return g.one_node or _one_node(g.devices)


def _one_node(devices: tuple[Device, ...]) -> bool:
    """``nodes_spanned(devices) == 1``, without building a set (asked of every group)."""
    if not devices:
        return False
    node = devices[0].node
    return all(d.node == node for d in devices)
