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
3. Migration: a running job moves to free GPUs of a faster type when the
   time it saves exceeds ``payback`` times what the move costs. What it
   saves is its remaining time times the speed it gains; its remaining
   time is estimated from the time it has run and the share of its work
   left (``remaining_seconds``), never from a duration it did not report.

On a cluster of one type this is ``placement.place``, decision for decision.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ringleader.policy.placement import FreeGPUs, keep_held, place, place_one, place_or_wait
from ringleader.policy.views import ClusterView, Device, JobView

_SLOW = 1e-9
"""A job at or below this speed on a type cannot run there (Gavel measured 0 steps/s)."""


def usable_types(job: JobView, cluster: ClusterView) -> tuple[str, ...]:
    """The cluster's types the job may run on and makes progress on."""
    return tuple(
        t for t in cluster.types if job.allows(t) and job.type_speed.get(t, 1.0) > _SLOW
    )


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

    migrate: bool = True
    payback: float = 2.0
    """A migration must save this many times its restart cost."""
    min_restart_s: float = 30.0
    """The restart cost assumed where the body has not measured one."""

    def place(
        self, counts: Mapping[str, int], jobs: Sequence[JobView], cluster: ClusterView
    ) -> dict[str, tuple[Device, ...]]:
        if not cluster.heterogeneous:
            return place(counts, jobs, cluster)
        free = FreeGPUs(cluster)
        placed, to_place = keep_held(counts, jobs, free)
        usable = {j.id: usable_types(j, cluster) for j in to_place}
        to_place.sort(
            key=lambda j: (-advantage(j, usable[j.id]), -counts[j.id], j.submitted_at, j.id)
        )
        for job in to_place:
            devices = self._one(job, counts[job.id], free, usable[job.id])
            if devices is not None:
                placed[job.id] = devices
        if self.migrate:
            self._upgrade(placed, [j for j in jobs if j.id in placed and j.devices], free, cluster)
        return placed

    @staticmethod
    def _one(
        job: JobView, want: int, free: FreeGPUs, usable: Sequence[str]
    ) -> tuple[Device, ...] | None:
        """Its fastest type with room for all ``want``; else across its usable types
        (None: they have too few free GPUs, and the job waits)."""
        by_speed = sorted(usable, key=lambda t: -job.type_speed.get(t, 1.0))
        for t in by_speed:
            if free.of((t,)) >= want:
                return place_one(job, want, free, (t,))
        if free.of(usable) < want:
            return None
        return place_one(job, want, free, usable)

    def _upgrade(
        self,
        placed: dict[str, tuple[Device, ...]],
        running: Sequence[JobView],
        free: FreeGPUs,
        cluster: ClusterView,
    ) -> None:
        """Move running jobs to free GPUs of faster types where the move pays (step 3)."""
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
                _give(free, placed[job.id])
                placed[job.id] = place_one(job, want, free, (t,))
                break


def _give(free: FreeGPUs, devices: Sequence[Device]) -> None:
    by_node: dict[str, list[int]] = {}
    for d in devices:
        by_node.setdefault(d.node, []).append(d.index)
    for node, indices in by_node.items():
        free.give(node, indices)
