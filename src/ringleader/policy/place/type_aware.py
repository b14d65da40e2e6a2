"""Placing on a cluster of mixed GPU types: by what a job gets done, not GPU counts.

A place stage (``Place``) for heterogeneous clusters, after Gandiva's
"low job parallelism → cheaper GPU" and Gavel's matching of job types to
accelerator types. It decides only *where*: which jobs run and at what size
is the order and size stages' business, so any policy can be made
type-aware by composing it with ``TypeAware()`` instead of ``FewestNodes()``.

1. Running jobs keep their GPUs (as ``FewestNodes`` does): a move costs a
   checkpoint-stop-restart and is only made in step 3, where it pays.
2. Jobs to place go in order of how much the type matters to them (their
   speed on their best type over their worst, ``advantage``), each on one
   type if one has room, its fastest first. A job for which the type
   matters most gets the fast GPUs; a job that runs nearly as fast on a
   K80 as on a V100 takes what is left. Only when no single type has room
   does a job span types; it then runs at its slowest type's speed
   (``JobView.speed_on``), and step 3 moves it when it can.
3. Swaps: a job placed now on a slow type may take the GPUs of a running job
   of the same size on a faster type, which moves to the new job's GPUs,
   when the new job gains more of its best speed than the running job loses
   of its own (by ``swap_margin``). When the cluster is full this is the
   only way a freed K80 goes to the job that minds it least.
4. Migration: a running job moves to free GPUs of a faster type when the
   time it saves exceeds ``payback`` times what the move costs. What it
   saves is its remaining time times the speed it gains; its remaining
   time is estimated from the time it has run and the share of its work
   left (``remaining_seconds``), never from a duration it did not report.

On a cluster of one type this is ``placement.place``, decision for decision.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ringleader.policy.model.memory import Memory, memory_of
from ringleader.policy.model.views import ClusterView, Device, JobView
from ringleader.policy.place._incremental.free import FreeGPUs
from ringleader.policy.place._incremental.keeping import LastKept
from ringleader.policy.place.fewest_nodes import place, place_one

_SLOW = 1e-9
"""A job at or below this speed on a type cannot run there (Gavel measured 0 steps/s)."""


def usable_types(job: JobView, cluster: ClusterView) -> tuple[str, ...]:
    """The cluster's types the job may run on and makes progress on."""
    return tuple(t for t in cluster.types if job.allows(t) and job.type_speed.get(t, 1.0) > _SLOW)


def advantage(job: JobView, types: Sequence[str]) -> float:
    """How much the GPU type matters to ``job``: its best speed over its worst (≥ 1)."""
    speeds = [job.type_speed.get(t, 1.0) for t in types]
    if not speeds or min(speeds) <= _SLOW:
        return 1.0 if not speeds else max(speeds) / _SLOW
    return max(speeds) / min(speeds)


def remaining_seconds(job: JobView) -> float:
    """Seconds of work left at the job's current speed, estimated without an oracle.

    The job has run about ``attained_gpu_s / workers`` seconds to do
    ``1 - remaining_fraction`` of its work; at that pace the rest takes
    proportionally long. A job that has done nothing yet has no estimate (0).
    """
    done = 1.0 - job.remaining_fraction
    if job.workers <= 0 or done <= 0:
        return 0.0
    ran = job.attained_gpu_s / job.workers
    return ran * job.remaining_fraction / done


@dataclass(frozen=True, slots=True)
class TypeAware:
    """The type-aware place stage (this module's docstring)."""

    @property
    def within_counts(self) -> bool:
        return True

    migrate: bool = True
    payback: float = 2.0
    """A migration must save this many times its restart cost."""
    min_restart_s: float = 30.0
    """The restart cost assumed where the body has not measured one."""
    swap_margin: float = 0.1
    """A swap must gain the new job this much more of its best speed than the running
    job loses of its own (step 3)."""
    one_node_first: bool = False
    """On a cluster of one type, place the jobs that fit one node before those that span
    nodes (``fewest_nodes``' docstring)."""
    memory: Memory[LastKept] = field(
        default_factory=memory_of(LastKept), init=False, repr=False, compare=False
    )
    """The last decision's kept GPUs: not part of what the stage is, nor of its equality."""

    def place(
        self, counts: Mapping[str, int], jobs: Sequence[JobView], cluster: ClusterView
    ) -> dict[str, tuple[Device, ...]]:
        if not cluster.heterogeneous:
            return place(counts, jobs, cluster, self.memory.kept, self.one_node_first)
        free, placed, to_place = self.memory.kept.keep_held(counts, jobs, cluster)
        usable = {j.id: usable_types(j, cluster) for j in to_place}
        to_place.sort(
            key=lambda j: (-advantage(j, usable[j.id]), -counts[j.id], j.submitted_at, j.id)
        )
        for job in to_place:
            devices = self._one(job, counts[job.id], free, usable[job.id])
            if devices is None and job.devices:
                # It cannot grow without slowing down: it keeps what it holds of its GPUs.
                mine = sorted(d for d in job.devices if free.has(d))
                devices = tuple(mine[: counts[job.id]]) or None
                if devices is not None:
                    free.take_devices(devices)
            if devices is not None:
                placed[job.id] = devices
        if self.migrate:
            staying = [j for j in jobs if j.id in placed and j.devices]
            fresh = [j for j in to_place if j.id in placed and not j.devices]
            self._swap(placed, fresh, staying, cluster)
            self._upgrade(placed, staying, free, cluster)
        return placed

    def _swap(
        self,
        placed: dict[str, tuple[Device, ...]],
        fresh: Sequence[JobView],
        running: Sequence[JobView],
        cluster: ClusterView,
    ) -> None:
        """Trade a new job's GPUs for a running job's of the same count on another type,
        where the new job gains more of its best speed than the running one loses (step 3)."""
        if not fresh or not running:
            return
        type_of = cluster.type_of

        def one_type(devices: Sequence[Device]) -> str | None:
            types = {type_of(d.node) for d in devices}
            return types.pop() if len(types) == 1 else None

        def norm(job: JobView, t: str) -> float:
            best = max(job.type_speed.get(u, 1.0) for u in cluster.types if job.allows(u))
            return job.type_speed.get(t, 1.0) / best if best > _SLOW else 0.0

        swappable = []
        for job in running:
            devices = placed[job.id]
            held_type = one_type(devices)
            if held_type is not None and set(devices) == set(job.devices):
                swappable.append((job, held_type))
        taken: set[str] = set()
        for job in sorted(fresh, key=lambda j: j.id):
            mine = placed[job.id]
            here = one_type(mine)
            if here is None:
                continue
            best_gain, partner = self.swap_margin, None
            for other, there in swappable:
                if other.id in taken or there == here or len(placed[other.id]) != len(mine):
                    continue
                if not job.allows(there) or not other.allows(here):
                    continue
                if other.type_speed.get(here, 1.0) <= _SLOW:
                    continue
                gain = (norm(job, there) - norm(job, here)) - (
                    norm(other, there) - norm(other, here)
                )
                if gain > best_gain:
                    best_gain, partner = gain, other
            if partner is not None:
                taken.add(partner.id)
                placed[job.id], placed[partner.id] = placed[partner.id], mine

    @staticmethod
    def _one(
        job: JobView, want: int, free: FreeGPUs, usable: Sequence[str]
    ) -> tuple[Device, ...] | None:
        """Its fastest type with room for all ``want``; else across its usable types
        (None: they have too few free GPUs, and the job waits)."""
        by_speed = sorted(usable, key=lambda t: -job.type_speed.get(t, 1.0))
        if job.devices:
            # Growing (or moved by another's growth): never onto a type slower than the
            # slowest it runs on now, which would slow the whole gang down to it.
            floor = job.speed_on(free.type_of[d.node] for d in job.devices)
            by_speed = [t for t in by_speed if job.type_speed.get(t, 1.0) >= floor]
        for t in by_speed:
            if free.of((t,)) >= want:
                return place_one(job, want, free, (t,))
        if job.devices:
            return None  # a running job is not spread over types to grow: it keeps its GPUs
        # Across types: the fastest few that hold it, so the slowest of them is fastest;
        # unless an elastic job does more on fewer GPUs of one type (counted as linear
        # speed-up: a gang spread over types runs every GPU at the slowest one's pace).
        speed = job.type_speed.get
        for k in range(2, len(by_speed) + 1):
            if free.of(by_speed[:k]) >= want:
                spread = want * speed(by_speed[k - 1], 1.0)
                if job.elastic:
                    fewer = max(by_speed, key=lambda t: min(free.of((t,)), want) * speed(t, 1.0))
                    n = min(free.of((fewer,)), want)
                    if n >= job.min_gpus and n * speed(fewer, 1.0) > spread:
                        return place_one(job, n, free, (fewer,))
                return place_one(job, want, free, by_speed[:k])
        return None

    def _upgrade(
        self,
        placed: dict[str, tuple[Device, ...]],
        running: Sequence[JobView],
        free: FreeGPUs,
        cluster: ClusterView,
    ) -> None:
        """Move running jobs to free GPUs of faster types where the move pays (step 4)."""
        if free.total == 0:
            return
        movers = []
        for job in running:
            devices = placed[job.id]
            if set(devices) != set(job.devices):
                continue  # resized or moved this decision already
            now = job.speed_on(cluster.type_of(d.node) for d in devices)
            left = remaining_seconds(job)
            if left <= 0 or now <= _SLOW:
                continue
            movers.append((left * now, job, now, left))
        # The most work left at stake first: the biggest saving claims the free GPUs.
        movers.sort(key=lambda m: (-m[0], m[1].id))
        for _, job, now, left in movers:
            want = len(placed[job.id])
            cost = max(job.restart_s, self.min_restart_s) * self.payback
            for t in sorted(usable_types(job, cluster), key=lambda t: -job.type_speed.get(t, 1.0)):
                speed = job.type_speed.get(t, 1.0)
                if speed <= now or free.of((t,)) < want:
                    continue
                if left * (1.0 - now / speed) <= cost:
                    break  # the fastest type with room does not pay; slower ones pay less
                free.give_devices(placed[job.id])
                placed[job.id] = place_one(job, want, free, (t,))
                break
