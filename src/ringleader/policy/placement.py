"""Which GPUs each job gets: as few nodes per job as possible (SPEC A6).

Jobs whose size did not change keep their GPUs; shrinking jobs keep a subset
(on the nodes where they have most); growing and new jobs are placed largest
first, on one node when any node can hold them (best fit, so big holes stay
big), otherwise on the fewest nodes by taking the emptiest first. Ties go to
the nodes a job already uses, so a resize moves as little as possible.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from ringleader.policy.views import ClusterView, Device, JobView


class PlacementError(RuntimeError):
    """The allocation asks for more GPUs than the cluster has free."""


def keep_subset(devices: Sequence[Device], count: int) -> tuple[Device, ...]:
    """``count`` of ``devices``, on the nodes where the job has most (a shrink moves least)."""
    per_node: dict[str, int] = {}
    for d in devices:
        per_node[d.node] = per_node.get(d.node, 0) + 1
    ranked = sorted(devices, key=lambda d: (-per_node[d.node], d.node, d.index))
    return tuple(sorted(ranked[:count]))


class FreeGPUs:
    """Free GPUs per node, indexed by how many are free, for best-fit in O(GPUs per node).

    One heap per free count holds (cluster order, node); entries go stale when a
    node's count changes and are skipped lazily. The heaps are built on the
    first search: keeping the GPUs that running jobs already hold, hundreds
    of takes a decision, then needs no heap work at all.
    """

    def __init__(self, cluster: ClusterView) -> None:
        self.free: dict[str, set[int]] = {n.name: set(range(n.gpus)) for n in cluster.nodes}
        self.order = {n.name: i for i, n in enumerate(cluster.nodes)}
        self.widest = max((n.gpus for n in cluster.nodes), default=0)
        self._heaps: list[list[tuple[int, str]]] | None = None
        self.total = sum(len(gpus) for gpus in self.free.values())

    @property
    def heaps(self) -> list[list[tuple[int, str]]]:
        if self._heaps is None:
            self._heaps = [[] for _ in range(self.widest + 1)]
            for name, gpus in self.free.items():
                self._heaps[len(gpus)].append((self.order[name], name))
            for heap in self._heaps:
                heapq.heapify(heap)
        return self._heaps

    def has(self, device: Device) -> bool:
        return device.index in self.free.get(device.node, ())

    def take(self, node: str, indices: Iterable[int]) -> None:
        gpus = self.free[node]
        before = len(gpus)
        gpus.difference_update(indices)
        self.total -= before - len(gpus)
        if len(gpus) != before and self._heaps is not None:
            heapq.heappush(self._heaps[len(gpus)], (self.order[node], node))

    def _bucket(self, count: int) -> Iterator[str]:
        """Nodes with exactly ``count`` free GPUs, in cluster order (drops stale entries)."""
        heap = self.heaps[count]
        while heap and len(self.free[heap[0][1]]) != count:
            heapq.heappop(heap)
        seen = set()
        for _, name in sorted(heap):
            if len(self.free[name]) == count and name not in seen:
                seen.add(name)
                yield name

    def _own_with(self, own: set[str], count: int) -> list[str]:
        if not own:
            return []
        return sorted((n for n in own if len(self.free[n]) == count), key=self.order.__getitem__)

    def give(self, node: str, indices: Iterable[int]) -> None:
        """Return GPUs to the free pool (a job moved or shrank)."""
        gpus = self.free[node]
        before = len(gpus)
        gpus.update(indices)
        self.total += len(gpus) - before
        if len(gpus) != before and self._heaps is not None:
            heapq.heappush(self._heaps[len(gpus)], (self.order[node], node))

    def best_fit(self, want: int, own: set[str]) -> str | None:
        """The node with the fewest free GPUs that still fits ``want`` (own nodes first)."""
        for count in range(want, self.widest + 1):
            owned = self._own_with(own, count)
            if owned:
                return owned[0]
            heap = self.heaps[count]
            while heap and len(self.free[heap[0][1]]) != count:
                heapq.heappop(heap)
            if heap:
                return heap[0][1]
        return None

    def widest_first(self, own: set[str]) -> Iterator[str]:
        """Nodes with free GPUs, most free first (own nodes first among equals)."""
        for count in range(self.widest, 0, -1):
            owned = self._own_with(own, count)
            yield from owned
            yield from (n for n in self._bucket(count) if n not in own)


class Place(Protocol):
    """The place stage: which GPUs each job with a non-zero count gets."""

    def place(
        self, counts: Mapping[str, int], jobs: Sequence[JobView], cluster: ClusterView
    ) -> dict[str, tuple[Device, ...]]: ...


@dataclass(frozen=True, slots=True)
class FewestNodes:
    """The default place stage: ``place`` (this module's docstring)."""

    def place(
        self, counts: Mapping[str, int], jobs: Sequence[JobView], cluster: ClusterView
    ) -> dict[str, tuple[Device, ...]]:
        return place(counts, jobs, cluster)


def place(
    counts: Mapping[str, int], jobs: Sequence[JobView], cluster: ClusterView
) -> dict[str, tuple[Device, ...]]:
    """Devices for every job with a non-zero count in ``counts``."""
    free = FreeGPUs(cluster)
    placed: dict[str, tuple[Device, ...]] = {}
    to_place: list[JobView] = []
    for job in jobs:
        want = counts.get(job.id, 0)
        if want == 0:
            continue
        gpus = free.free
        current = tuple(d for d in job.devices if d.index in gpus.get(d.node, ()))
        if current and len(current) >= want:
            kept = current if len(current) == want else keep_subset(current, want)
            by_node: dict[str, list[int]] = {}
            for d in kept:  # one take per node, not one per GPU
                by_node.setdefault(d.node, []).append(d.index)
            for node, indices in by_node.items():
                free.take(node, indices)
            placed[job.id] = kept
        else:
            to_place.append(job)
    to_place.sort(key=lambda j: (-counts[j.id], j.submitted_at, j.id))
    for job in to_place:
        placed[job.id] = place_one(job, counts[job.id], free)
    return placed


def place_one(job: JobView, want: int, free: FreeGPUs) -> tuple[Device, ...]:
    """``want`` free GPUs for ``job``: one node if any fits, else the fewest, its own first."""
    own = {d.node for d in job.devices}
    if free.total < want:
        raise PlacementError(f"job {job.id} needs {want} GPUs but fewer are free")
    best = free.best_fit(want, own)
    chosen: list[str] = []
    if best is not None:
        chosen = [best]
    else:
        total = 0
        for n in free.widest_first(own):
            if total >= want:
                break
            chosen.append(n)
            total += len(free.free[n])
    previous = {(d.node, d.index) for d in job.devices}
    devices: list[Device] = []
    for n in chosen:
        take = min(want - len(devices), len(free.free[n]))
        indices = sorted(free.free[n], key=lambda i: ((n, i) not in previous, i))[:take]
        free.take(n, indices)
        devices.extend(Device(n, i) for i in indices)
    return tuple(sorted(devices))
