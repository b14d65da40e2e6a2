"""The free GPUs of a cluster during one placement, indexed for best fit.

A place stage starts from one of these, takes the GPUs that running jobs keep
(``policy.keeping``), then searches it for the rest; Gandiva's own stack
(``policy.sharing``) searches one for its groups.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Collection, Iterable, Iterator, Mapping

from ringleader.policy.model.views import ClusterView, Device


class FreeGPUs:
    """Free GPUs per node, indexed by GPU type and free count, for best-fit in O(GPUs per node).

    The index keeps, per (type, free count), the cluster order of each node with
    exactly that many GPUs free, sorted: the best fit for a count is its list's
    head. A node moves from one list to another as its count changes, so the
    index is exact at all times, with no stale entries to skip or rebuild
    (docs/scale.md, "The free-GPU index"). The index is built on the first
    search: keeping the GPUs that running jobs already hold, hundreds of takes a
    decision, then needs no index work at all. Searches take the GPU types a job
    may use (None: any); a cluster of one type has one index and searches
    exactly as an untyped one.
    """

    def __init__(self, cluster: ClusterView | FreeGPUs) -> None:
        """All of ``cluster``'s GPUs free; or, given another ``FreeGPUs``, a copy of it
        (``copy``)."""
        self.free: dict[str, set[int]]
        """Each node's free GPUs: read it, change it only through ``take`` and ``give``."""
        self.order: dict[str, int]
        self.names: list[str]
        """Node names by cluster order: what the index's entries stand for."""
        self.type_of: Mapping[str, str]
        self.types: tuple[str, ...]
        self.widest: int
        self.total: int
        self._own: set[str] = set()
        """Nodes whose set in ``free`` is this one's alone (the rest may be a copy's too)."""
        self._index: dict[str, list[list[int]]] | None = None
        """Per type, per free count: the cluster order of each node with exactly that many
        GPUs free, ascending (None until the first search)."""
        if isinstance(cluster, FreeGPUs):
            self.free = dict(cluster.free)
            cluster._own = set()  # its sets are shared with this one now
            self.order, self.names = cluster.order, cluster.names
            self.type_of, self.types = cluster.type_of, cluster.types
            self.widest, self.total = cluster.widest, cluster.total
            if cluster._index is not None:
                self._index = {t: [list(b) for b in per] for t, per in cluster._index.items()}
        else:
            self.free = {n.name: set(range(n.gpus)) for n in cluster.nodes}
            self._own = set(self.free)
            self.order = {n.name: i for i, n in enumerate(cluster.nodes)}
            self.names = [n.name for n in cluster.nodes]
            self.type_of = cluster.node_types
            self.types = cluster.types
            self.widest = cluster.widest_node
            self.total = sum(len(gpus) for gpus in self.free.values())

    @classmethod
    def outside(
        cls,
        cluster: ClusterView,
        held: Mapping[str, int],
        blank: Blank | None = None,
    ) -> FreeGPUs:
        """``cluster``'s GPUs free but those ``held`` (per node, a bitmask: bit ``i`` for
        GPU ``i``, as ``groups.current_groups`` gives them); ``blank`` keeps the cluster's
        GPUs all free from one call to the next.

        One change per node instead of a ``take`` per job: Gandiva's stack works out
        which GPUs its groups hold at every decision (docs/scale.md, "The free-GPU index").
        """
        free = cls(cluster) if blank is None else blank.copy(cluster)
        free._index = None  # the counts change below without it: built at the first search
        total = free.total
        sets, own = free.free, free._own
        for node, bits in held.items():
            gpus = sets.get(node)
            if gpus is None:
                continue  # a node the body no longer reports (a Slurm node between states)
            before = len(gpus)
            if node in own:
                gpus.difference_update([i for i in gpus if bits >> i & 1])
            elif bits == (1 << before) - 1:
                # A blank copy's node is all free, GPUs 0 to ``before`` - 1 (``Blank``): all
                # held, it shares one empty set, copied before any change (``_mine``).
                gpus = sets[node] = _NONE_FREE
            else:
                gpus = sets[node] = {i for i in range(before) if not bits >> i & 1}
                own.add(node)
            total -= before - len(gpus)
        free.total = total
        return free

    def copy(self) -> FreeGPUs:
        """The same free GPUs, changed apart from this one from now on.

        Cheap where a decision's placement starts from the free GPUs kept from the
        last (``policy.keeping.LastKept``): the two share each node's set until
        either changes it, and the index, if built, is copied rather than built
        again. At 12,500 nodes copying every set was 4.5 ms a decision, and
        building the index 2 ms more.
        """
        return FreeGPUs(self)

    def _mine(self, node: str) -> set[int]:
        """``node``'s free set, copied first if a copy may share it."""
        gpus = self.free[node]
        if node not in self._own:
            gpus = self.free[node] = set(gpus)
            self._own.add(node)
        return gpus

    @property
    def buckets(self) -> dict[str, list[list[int]]]:
        """The index (the class docstring), built if it is not yet."""
        if self._index is None:
            index: dict[str, list[list[int]]] = {
                t: [[] for _ in range(self.widest + 1)] for t in self.types
            }
            order = self.order
            for name, gpus in self.free.items():
                index[self.type_of[name]][len(gpus)].append(order[name])
            for per_count in index.values():
                for bucket in per_count:
                    bucket.sort()  # in cluster order already, unless the dict was refilled
            self._index = index
        return self._index

    def has(self, device: Device) -> bool:
        return device.index in self.free.get(device.node, ())

    def of(self, types: Collection[str] | None) -> int:
        """Free GPUs of ``types`` (None: of any type)."""
        if types is None or (len(self.types) == 1 and self.types[0] in types):
            return self.total
        return sum(len(g) for n, g in self.free.items() if self.type_of[n] in types)

    def _move(self, node: str, before: int, after: int) -> None:
        """Move ``node`` in the index from free count ``before`` to ``after``."""
        assert self._index is not None
        per_count = self._index[self.type_of[node]]
        i = self.order[node]
        old = per_count[before]
        j = bisect_left(old, i)
        # Were the index not exact, the deletion would drop another node: say so instead.
        assert j < len(old) and old[j] == i, f"{node} is not indexed under {before} free"
        del old[j]
        insort(per_count[after], i)

    def index(self) -> None:
        """Build the index now (it is built on first search otherwise), so that it is
        kept up to date from here on and copies start with it."""
        self.buckets  # noqa: B018  # the property builds it

    def take(self, node: str, indices: Iterable[int]) -> None:
        gpus = self._mine(node)
        before = len(gpus)
        gpus.difference_update(indices)
        self.total -= before - len(gpus)
        if self._index is not None and len(gpus) != before:  # no call until searched
            self._move(node, before, len(gpus))

    def give(self, node: str, indices: Iterable[int]) -> None:
        """Return GPUs to the free pool (a job moved or shrank)."""
        gpus = self._mine(node)
        before = len(gpus)
        gpus.update(indices)
        self.total += len(gpus) - before
        if self._index is not None and len(gpus) != before:
            self._move(node, before, len(gpus))

    def take_devices(self, devices: Iterable[Device]) -> None:
        """``take`` for each node ``devices`` are on: one take per node, not per GPU."""
        node = _sole_node(devices)
        if node is not None:
            # Most jobs hold GPUs of one node: no grouping by node for them (Gandiva's
            # stack takes every group's GPUs anew at each decision).
            self.take(node, [d.index for d in devices])
            return
        for node, indices in by_node(devices).items():
            self.take(node, indices)

    def give_devices(self, devices: Iterable[Device]) -> None:
        """``give`` for each node ``devices`` are on."""
        node = _sole_node(devices)
        if node is not None:
            self.give(node, [d.index for d in devices])
            return
        for node, indices in by_node(devices).items():
            self.give(node, indices)

    def _bucket(self, count: int, types: Collection[str] | None) -> list[str]:
        """Nodes of ``types`` with exactly ``count`` free GPUs, in cluster order."""
        allowed = self._allowed(types)
        names, index = self.names, self.buckets
        if len(allowed) == 1:
            return [names[i] for i in index[allowed[0]][count]]
        return [names[i] for i in sorted(i for t in allowed for i in index[t][count])]

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
        index = self.buckets
        single = index[allowed[0]] if len(allowed) == 1 else None
        for count in range(want, self.widest + 1):
            owned = self._own_with(own, count, types)
            if owned:
                return owned[0]
            if single is not None:  # one type: one index, as before types
                bucket = single[count]
                if bucket:
                    return self.names[bucket[0]]
                continue
            heads = [index[t][count][0] for t in allowed if index[t][count]]
            if heads:
                return self.names[min(heads)]
        return None

    def widest_first(self, own: set[str], types: Collection[str] | None = None) -> Iterator[str]:
        """Nodes of ``types`` with free GPUs, most free first (own nodes first among equals)."""
        for count in range(self.widest, 0, -1):
            yield from self._own_with(own, count, types)
            yield from (n for n in self._bucket(count, types) if n not in own)


def _sole_node(devices: Iterable[Device]) -> str | None:
    """The node all of ``devices`` are on, where they are a tuple on one node (else None)."""
    if not isinstance(devices, tuple) or not devices:
        return None
    first: Device = devices[0]
    node = first.node
    for d in devices:
        if d.node != node:
            return None
    return node


def by_node(devices: Iterable[Device]) -> dict[str, list[int]]:
    """The indices of ``devices`` on each node, as ``FreeGPUs.take`` wants them."""
    grouped: dict[str, list[int]] = {}
    for d in devices:
        grouped.setdefault(d.node, []).append(d.index)
    return grouped


_NONE_FREE: set[int] = set()
"""A node's free GPUs where none is: shared by every node ``FreeGPUs.outside`` finds all
held, and never changed (no ``FreeGPUs`` owns it, so ``_mine`` copies it first)."""


class Blank:
    """A cluster's GPUs all free, kept from one decision to the next.

    Its copies' sets are each node's GPUs ``0`` to ``gpus - 1`` until changed, which
    ``FreeGPUs.outside`` counts on.

    A stage that starts each decision from every GPU free (Gandiva's stack, through
    ``FreeGPUs.outside``) takes a copy, which shares each node's set until it
    changes it, instead of building every node's set, the cluster's order and its
    totals again.
    """

    __slots__ = ("_cluster", "_free")

    def __init__(self) -> None:
        self._cluster: ClusterView | None = None
        self._free: FreeGPUs | None = None

    def copy(self, cluster: ClusterView) -> FreeGPUs:
        """Every GPU of ``cluster`` free, to change at will."""
        free = self._free
        if free is None or cluster is not self._cluster:
            free = self._free = FreeGPUs(cluster)
            self._cluster = cluster
        return free.copy()
