"""Which GPUs each job gets: as few nodes per job as possible (SPEC A6).

Jobs whose size did not change keep their GPUs; shrinking jobs keep a subset
(on the nodes where they have most); growing and new jobs are placed largest
first, on one node when any node can hold them (best fit, so big holes stay
big), otherwise on the fewest nodes by taking the emptiest first. Ties go to
the nodes a job already uses, so a resize moves as little as possible.

With ``one_node_first``, the jobs that fit one node are placed before those that
span nodes. A small job split across nodes syncs over the network where it
synced within a node, which can double its step; a job already across the
network loses little to a few more nodes (the measured tables are in
``docs/pollux.md``). Largest first, the wide jobs take the emptiest nodes and
leave the small ones the fragments.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ringleader.policy.model.memory import Memory, memory_of
from ringleader.policy.model.views import ClusterView, Device, JobView
from ringleader.policy.place._incremental.free import FreeGPUs
from ringleader.policy.place._incremental.keeping import LastKept, keep_held, keep_subset
from ringleader.policy.place.errors import PlacementError
from ringleader.policy.place.stage import Place

__all__ = [
    "FewestNodes",
    "FreeGPUs",
    "Place",
    "PlacementError",
    "keep_held",
    "keep_subset",
    "nodes_spanned",
    "place",
    "place_one",
    "place_or_wait",
]


def nodes_spanned(devices: Iterable[Device]) -> int:
    """How many nodes ``devices`` are on."""
    return len({d.node for d in devices})


@dataclass(frozen=True, slots=True)
class FewestNodes:
    """The default place stage: ``place`` (this module's docstring)."""

    @property
    def within_counts(self) -> bool:
        return True

    one_node_first: bool = False
    """Place the jobs that fit one node before those that span nodes (the module's
    docstring)."""

    memory: Memory[LastKept] = field(
        default_factory=memory_of(LastKept), init=False, repr=False, compare=False
    )
    """The last decision's kept GPUs: not part of what the stage is, nor of its equality."""

    def place(
        self, counts: Mapping[str, int], jobs: Sequence[JobView], cluster: ClusterView
    ) -> dict[str, tuple[Device, ...]]:
        return place(counts, jobs, cluster, self.memory.kept, self.one_node_first)


def place(
    counts: Mapping[str, int],
    jobs: Sequence[JobView],
    cluster: ClusterView,
    kept: LastKept | None = None,
    one_node_first: bool = False,
) -> dict[str, tuple[Device, ...]]:
    """Devices for every job with a non-zero count in ``counts``; ``kept`` carries what
    running jobs kept from one decision to the next (the same result, sooner).
    ``one_node_first``: see the module's docstring."""
    if kept is None:
        free = FreeGPUs(cluster)
        placed, to_place = keep_held(counts, jobs, free)
    else:
        free, placed, to_place = kept.keep_held(counts, jobs, cluster)
    wide = cluster.widest_node if one_node_first else math.inf  # past it: placed after
    to_place.sort(key=lambda j: (counts[j.id] > wide, -counts[j.id], j.submitted_at, j.id))
    for job in to_place:
        devices = place_or_wait(job, counts[job.id], free)
        if devices is not None:
            placed[job.id] = devices
    return placed


def place_or_wait(
    job: JobView, want: int, free: FreeGPUs, types: Collection[str] | None = None
) -> tuple[Device, ...] | None:
    """``place_one``, except that a job whose GPU types have too few GPUs free gets None.

    The size stage counts GPUs of every type, so it can give a job that is
    confined to some types (``JobView.gpu_types``) more than those types have
    free; the job then waits, and ``Policy.decide`` sizes the others again.
    """
    try:
        return place_one(job, want, free, types)
    except PlacementError:
        if not job.gpu_types:
            raise  # any GPU would do: the size stage gave out more than the cluster has
        return None


def place_one(
    job: JobView, want: int, free: FreeGPUs, types: Collection[str] | None = None
) -> tuple[Device, ...]:
    """``want`` free GPUs for ``job``: one node if any fits, else the fewest, its own first.

    Only GPUs of ``types`` are taken; by default, those the job allows
    (``JobView.gpu_types``; none named: any)."""
    if types is None and job.gpu_types:
        types = job.gpu_types
    own = {d.node for d in job.devices}
    if free.of(types) < want:
        raise PlacementError(f"job {job.id} needs {want} GPUs but fewer are free")
    best = free.best_fit(want, own, types)
    chosen: list[str] = []
    if best is not None:
        chosen = [best]
    else:
        total = 0
        for n in free.widest_first(own, types):
            if total >= want:
                break
            chosen.append(n)
            total += len(free.free[n])
    return take_on(chosen, want, free, {(d.node, d.index) for d in job.devices})


def take_on(
    nodes: Sequence[str],
    want: int,
    free: FreeGPUs,
    previous: Collection[tuple[str, int]] = (),
) -> tuple[Device, ...]:
    """``want`` free GPUs of ``nodes``, in that order, each node's ``previous`` GPUs
    (``(node, index)``) first; taken from ``free``, returned in ``Device`` order."""
    picks: list[tuple[str, list[int]]] = []
    left = want
    for n in nodes:
        take = min(left, len(free.free[n]))
        if previous:
            chosen = sorted(free.free[n], key=lambda i: ((n, i) not in previous, i))[:take]
            indices = sorted(chosen)
        else:
            indices = sorted(free.free[n])[:take]
        free.take(n, indices)
        picks.append((n, indices))
        left -= take
    # In ``Device`` order (node, then index) as built: sorting the devices themselves
    # compares them in Python, 7 million times a 16,384-GPU gang (issue 61's scenario).
    picks.sort(key=lambda pick: pick[0])
    return tuple(Device(n, i) for n, indices in picks for i in indices)
