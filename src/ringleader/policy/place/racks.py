"""Placing gangs within racks: as few racks as possible, then as few nodes.

A gang that spans two racks synchronises over the links between them, which
in a large cluster are several times slower than those within a rack
(oversubscribed spines). ``FewestRacks`` places each job as ``FewestNodes``
does, but first picks where: the rack with the fewest free GPUs that still
holds the whole job (best fit, so big holes stay whole for big gangs), else
the fewest racks, fullest first. With ``required``, a job that would fit in
one rack waits rather than span two (Kueue's topology-aware scheduling calls
these ``preferred`` and ``required`` levels). On a cluster without racks it is
``FewestNodes``. Running jobs keep their GPUs as with ``FewestNodes``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from ringleader.policy.model.views import ClusterView, Device, JobView
from ringleader.policy.place._incremental.free import FreeGPUs
from ringleader.policy.place._incremental.keeping import keep_held
from ringleader.policy.place.errors import PlacementError
from ringleader.policy.place.fewest_nodes import place_or_wait, take_on


@dataclass(frozen=True, slots=True)
class FewestRacks:
    """Each job on the fewest racks, then the fewest nodes (the module docstring)."""

    required: bool = False
    """A job that fits in one rack waits for one rather than span two."""

    @property
    def within_counts(self) -> bool:
        return True

    def place(
        self, counts: Mapping[str, int], jobs: Sequence[JobView], cluster: ClusterView
    ) -> dict[str, tuple[Device, ...]]:
        free = FreeGPUs(cluster)
        placed, to_place = keep_held(counts, jobs, free)
        to_place.sort(key=lambda j: (-counts[j.id], j.submitted_at, j.id))
        racks = cluster.node_racks if cluster.racked else None
        largest = _largest_rack(cluster) if self.required else 0
        for job in to_place:
            want = counts[job.id]
            if racks is None:
                devices = place_or_wait(job, want, free)
            else:
                devices = place_in_racks(job, want, free, racks, required_within=largest)
            if devices is not None:
                placed[job.id] = devices
        return placed


def place_in_racks(
    job: JobView,
    want: int,
    free: FreeGPUs,
    racks: Mapping[str, str],
    *,
    required_within: int = 0,
) -> tuple[Device, ...] | None:
    """``want`` free GPUs for ``job`` on the fewest racks, then nodes (None: it waits:
    it needs no more than ``required_within`` GPUs, as big as the largest rack, and
    no rack has them free; or its GPU types have too few free)."""
    types: Collection[str] | None = job.gpu_types or None
    nodes = [n for n in free.names if free.free[n] and (types is None or free.type_of[n] in types)]
    per_rack: dict[str, int] = {}
    for n in nodes:
        per_rack[racks[n]] = per_rack.get(racks[n], 0) + len(free.free[n])
    if sum(per_rack.values()) < want:
        if types is not None:
            return None
        raise PlacementError(f"job {job.id} needs {want} GPUs but fewer are free")
    holding = [r for r, k in per_rack.items() if k >= want]
    if holding:
        chosen = {min(holding, key=lambda r: (per_rack[r], r))}
    elif want <= required_within:
        return None  # it fits in a rack once one frees up
    else:
        chosen, total = set(), 0
        for r in sorted(per_rack, key=lambda r: (-per_rack[r], r)):
            if total >= want:
                break
            chosen.add(r)
            total += per_rack[r]
    return _take(want, [n for n in nodes if racks[n] in chosen], free)


def _largest_rack(cluster: ClusterView) -> int:
    """The most GPUs any rack has, free or not."""
    sizes: dict[str, int] = {}
    for n in cluster.nodes:
        sizes[n.rack] = sizes.get(n.rack, 0) + n.gpus
    return max(sizes.values(), default=0)


def _take(want: int, nodes: list[str], free: FreeGPUs) -> tuple[Device, ...]:
    """``want`` GPUs of ``nodes``: the one that fits best if any holds them all, else
    the widest first (``take_on``)."""
    fits = [n for n in nodes if len(free.free[n]) >= want]
    if fits:
        chosen = [min(fits, key=lambda n: (len(free.free[n]), free.order[n]))]
    else:
        chosen, total = [], 0
        for n in sorted(nodes, key=lambda n: (-len(free.free[n]), free.order[n])):
            if total >= want:
                break
            chosen.append(n)
            total += len(free.free[n])
    return take_on(chosen, want, free)
