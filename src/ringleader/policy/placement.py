"""Which GPUs each job gets: as few nodes per job as possible (SPEC A6).

Jobs whose size did not change keep their GPUs; shrinking jobs keep a subset
(on the nodes where they have most); growing and new jobs are placed largest
first, on one node when any node can hold them (best fit, so big holes stay
big), otherwise on the fewest nodes by taking the emptiest first. Ties go to
the nodes a job already uses, so a resize moves as little as possible.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
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
    """Free GPUs per node, indexed by GPU type and free count, for best-fit in O(GPUs per node).

    One heap per (type, free count) holds (cluster order, node); entries go
    stale when a node's count changes and are skipped lazily. The heaps are
    built on the first search: keeping the GPUs that running jobs already
    hold, hundreds of takes a decision, then needs no heap work at all.
    Searches take the GPU types a job may use (None: any); a cluster of one
    type has one set of heaps and searches exactly as an untyped one.
    """

    def __init__(self, cluster: ClusterView) -> None:
        self.free: dict[str, set[int]] = {n.name: set(range(n.gpus)) for n in cluster.nodes}
        self.order = {n.name: i for i, n in enumerate(cluster.nodes)}
        self.type_of = cluster.node_types
        self.types = cluster.types
        self.widest = max((n.gpus for n in cluster.nodes), default=0)
        self._heaps: dict[str, list[list[tuple[int, str]]]] | None = None
        self.total = sum(len(gpus) for gpus in self.free.values())

    @property
    def heaps(self) -> dict[str, list[list[tuple[int, str]]]]:
        if self._heaps is None:
            self._heaps = {t: [[] for _ in range(self.widest + 1)] for t in self.types}
            for name, gpus in self.free.items():
                self._heaps[self.type_of[name]][len(gpus)].append((self.order[name], name))
            for per_count in self._heaps.values():
                for heap in per_count:
                    heapq.heapify(heap)
        return self._heaps

    def has(self, device: Device) -> bool:
        return device.index in self.free.get(device.node, ())

    def of(self, types: Collection[str] | None) -> int:
        """Free GPUs of ``types`` (None: of any type)."""
        if types is None or (len(self.types) == 1 and self.types[0] in types):
            return self.total
        return sum(len(g) for n, g in self.free.items() if self.type_of[n] in types)

    def _push(self, node: str, count: int) -> None:
        """Index ``node`` under its new free ``count`` (once the heaps exist)."""
        assert self._heaps is not None
        heapq.heappush(self._heaps[self.type_of[node]][count], (self.order[node], node))

    def take(self, node: str, indices: Iterable[int]) -> None:
        gpus = self.free[node]
        before = len(gpus)
        gpus.difference_update(indices)
        self.total -= before - len(gpus)
        if self._heaps is not None and len(gpus) != before:  # no call until searched
            self._push(node, len(gpus))

    def give(self, node: str, indices: Iterable[int]) -> None:
        """Return GPUs to the free pool (a job moved or shrank)."""
        gpus = self.free[node]
        before = len(gpus)
        gpus.update(indices)
        self.total += len(gpus) - before
        if self._heaps is not None and len(gpus) != before:
            self._push(node, len(gpus))

    def take_devices(self, devices: Iterable[Device]) -> None:
        """``take`` for each node ``devices`` are on: one take per node, not per GPU."""
        for node, indices in _by_node(devices).items():
            self.take(node, indices)

    def give_devices(self, devices: Iterable[Device]) -> None:
        """``give`` for each node ``devices`` are on."""
        for node, indices in _by_node(devices).items():
            self.give(node, indices)

    def _top(self, heap: list[tuple[int, str]], count: int) -> tuple[int, str] | None:
        while heap and len(self.free[heap[0][1]]) != count:
            heapq.heappop(heap)
        return heap[0] if heap else None

    def _bucket(self, count: int, types: Collection[str] | None) -> list[str]:
        """Nodes of ``types`` with exactly ``count`` free GPUs, in cluster order."""
        found: set[tuple[int, str]] = set()
        for t in self._allowed(types):
            heap = self.heaps[t][count]
            self._top(heap, count)
            found.update(e for e in heap if len(self.free[e[1]]) == count)
        return [name for _, name in sorted(found)]

    def _allowed(self, types: Collection[str] | None) -> tuple[str, ...]:
        if types is None:
            return self.types
        return tuple(t for t in self.types if t in types)

    def _own_with(self, own: set[str], count: int, types: Collection[str] | None) -> list[str]:
        if not own:
            return []
        return sorted(
            (
                n
                for n in own
                if len(self.free[n]) == count and (types is None or self.type_of[n] in types)
            ),
            key=self.order.__getitem__,
        )

    def best_fit(
        self, want: int, own: set[str], types: Collection[str] | None = None
    ) -> str | None:
        """The node of ``types`` with the fewest free GPUs that still fits ``want``
        (own nodes first)."""
        allowed = self._allowed(types)
        single = self.heaps[allowed[0]] if len(allowed) == 1 else None
        for count in range(want, self.widest + 1):
            owned = self._own_with(own, count, types)
            if owned:
                return owned[0]
            if single is not None:  # one type: one heap per count, as before types
                top = self._top(single[count], count)
                if top is not None:
                    return top[1]
                continue
            tops = [self._top(self.heaps[t][count], count) for t in allowed]
            best = min((e for e in tops if e is not None), default=None)
            if best is not None:
                return best[1]
        return None

    def widest_first(self, own: set[str], types: Collection[str] | None = None) -> Iterator[str]:
        """Nodes of ``types`` with free GPUs, most free first (own nodes first among equals)."""
        for count in range(self.widest, 0, -1):
            yield from self._own_with(own, count, types)
            yield from (n for n in self._bucket(count, types) if n not in own)


def nodes_spanned(devices: Iterable[Device]) -> int:
    """How many nodes ``devices`` are on."""
    return len({d.node for d in devices})


def _by_node(devices: Iterable[Device]) -> dict[str, list[int]]:
    by_node: dict[str, list[int]] = {}
    for d in devices:
        by_node.setdefault(d.node, []).append(d.index)
    return by_node


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
    placed, to_place = keep_held(counts, jobs, free)
    to_place.sort(key=lambda j: (-counts[j.id], j.submitted_at, j.id))
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


def keep_held(
    counts: Mapping[str, int], jobs: Sequence[JobView], free: FreeGPUs
) -> tuple[dict[str, tuple[Device, ...]], list[JobView]]:
    """Jobs that keep (a subset of) the GPUs they hold, taken from ``free``; and the
    jobs left to place: new, growing, or whose GPUs another job kept."""
    placed: dict[str, tuple[Device, ...]] = {}
    to_place: list[JobView] = []
    # A time-sliced group's running job keeps its GPUs before a suspended resident
    # of the group may: moving the suspended one costs no running progress.
    suspended = [job for job in jobs if job.suspended]
    if suspended:
        jobs = [job for job in jobs if not job.suspended] + suspended
    gpus = free.free
    for job in jobs:
        want = counts.get(job.id, 0)
        if want == 0:
            continue
        # Which of its GPUs are still free, grouped by node as ``take`` wants them:
        # one pass, as this runs for every running job at every decision.
        by_node: dict[str, list[int]] = {}
        found = 0
        for d in job.devices:
            on = gpus.get(d.node)
            if on is not None and d.index in on:
                by_node.setdefault(d.node, []).append(d.index)
                found += 1
        if found < want:
            to_place.append(job)
        elif found == want == len(job.devices):  # keeps all it holds: the usual case
            placed[job.id] = job.devices
            for node, indices in by_node.items():
                free.take(node, indices)
        else:
            current = tuple(d for d in job.devices if d.index in gpus.get(d.node, ()))
            kept = current if found == want else keep_subset(current, want)
            free.take_devices(kept)
            placed[job.id] = kept
    return placed, to_place


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
    previous = {(d.node, d.index) for d in job.devices}
    devices: list[Device] = []
    for n in chosen:
        take = min(want - len(devices), len(free.free[n]))
        indices = sorted(free.free[n], key=lambda i: ((n, i) not in previous, i))[:take]
        free.take(n, indices)
        devices.extend(Device(n, i) for i in indices)
    return tuple(sorted(devices))
