"""``FreeGPUs`` copies share sets until either side changes them, and copy their index:
each side must still search exactly as one built afresh from its own free GPUs."""

from __future__ import annotations

import random

import pytest

from ringleader.policy.model.views import ClusterView
from ringleader.policy.place._incremental.free import Blank, FreeGPUs


def _afresh(cluster: ClusterView, free: dict[str, set[int]]) -> FreeGPUs:
    """A ``FreeGPUs`` built from scratch with exactly ``free`` left."""
    built = FreeGPUs(cluster)
    for node in cluster.nodes:
        built.take(node.name, set(range(node.gpus)) - free[node.name])
    return built


def _searches(f: FreeGPUs, own: set[str]) -> list[object]:
    return [
        f.total,
        {n: sorted(g) for n, g in f.free.items()},
        [f.best_fit(want, own) for want in range(1, 9)],
        list(f.widest_first(own)),
    ]


@pytest.mark.parametrize("seed", range(6))
def test_copies_change_apart_and_search_as_if_built_afresh(seed: int) -> None:
    rng = random.Random(seed)
    cluster = ClusterView.uniform(6, 8)
    truth: list[dict[str, set[int]]] = [{n.name: set(range(8)) for n in cluster.nodes}]
    live = [FreeGPUs(cluster)]
    if seed % 2:
        live[0].index()  # with the index kept up to date, as LastKept keeps its own
    for _ in range(400):
        i = rng.randrange(len(live))
        action = rng.random()
        if action < 0.15 and len(live) < 6:
            live.append(live[i].copy())
            truth.append({n: set(g) for n, g in truth[i].items()})
            continue
        node = f"node{rng.randrange(6)}"
        gpus = set(rng.sample(range(8), rng.randint(1, 4)))
        if action < 0.55:
            live[i].take(node, gpus & truth[i][node])
            truth[i][node] -= gpus
        elif action < 0.9:
            live[i].give(node, gpus)
            truth[i][node] |= gpus
        else:
            # A search, which builds this side's index where it has none yet.
            live[i].best_fit(rng.randint(1, 8), set())
        for f, t in zip(live, truth, strict=True):
            assert f.free == t
        j = rng.randrange(len(live))
        own = {f"node{rng.randrange(6)}"} if rng.random() < 0.5 else set()
        assert _searches(live[j], own) == _searches(_afresh(cluster, truth[j]), own)


@pytest.mark.parametrize("seed", range(3))
def test_a_kept_index_holds_each_node_once_under_its_free_count(seed: int) -> None:
    rng = random.Random(seed)
    cluster = ClusterView.typed({"a": (4, 8), "b": (3, 4)})
    f = FreeGPUs(cluster)
    f.index()
    for _ in range(500):
        node = rng.choice(cluster.nodes)
        gpus = set(rng.sample(range(node.gpus), rng.randint(1, node.gpus)))
        if rng.random() < 0.5:
            f.take(node.name, gpus)
        else:
            f.give(node.name, gpus)
        if rng.random() < 0.1:
            f = f.copy()  # a copy carries the index on, as LastKept's decisions do
    where = {
        (t, count, f.names[i])
        for t, per_count in f.buckets.items()
        for count, bucket in enumerate(per_count)
        for i in bucket
    }
    assert sorted(where) == sorted(
        (f.type_of[n.name], len(f.free[n.name]), n.name) for n in cluster.nodes
    )
    for per_count in f.buckets.values():
        assert all(bucket == sorted(bucket) for bucket in per_count)
    afresh = _afresh(cluster, f.free)
    for types in (None, {"a"}, {"b"}, {"a", "b"}):
        assert [f.best_fit(w, set(), types) for w in range(1, 9)] == [
            afresh.best_fit(w, set(), types) for w in range(1, 9)
        ]
        assert list(f.widest_first(set(), types)) == list(afresh.widest_first(set(), types))


@pytest.mark.parametrize("seed", range(4))
def test_the_gpus_outside_those_held_are_those_left_after_taking_them(seed: int) -> None:
    rng = random.Random(seed)
    cluster = ClusterView.uniform(5, 8)
    held: dict[str, int] = {}  # per node, a bitmask of the GPUs held
    taken = FreeGPUs(cluster)
    for node in cluster.nodes:
        if rng.random() < 0.8:
            indices = set(rng.sample(range(8), rng.randint(0, 8)))
            held[node.name] = sum(1 << i for i in indices)
            taken.take(node.name, indices)
    outside = FreeGPUs.outside(cluster, held)
    assert outside.free == taken.free and outside.total == taken.total
    assert _searches(outside, set()) == _searches(taken, set())
    outside.take("node0", {0, 1})  # its sets are its own: the cluster's view is unchanged
    assert FreeGPUs(cluster).free["node0"] == set(range(8))
    # From a kept blank, again and again: each copy is changed apart from the blank.
    blank = Blank()
    for _ in range(3):
        kept = FreeGPUs.outside(cluster, held, blank)
        assert kept.free == taken.free and kept.total == taken.total
        assert _searches(kept, set()) == _searches(taken, set())
        for node in cluster.nodes:
            kept.take(node.name, set(kept.free[node.name]))
        assert kept.total == 0
        for node in cluster.nodes:  # nodes all held share one empty set: changed apart
            kept.give(node.name, {7})
        assert kept.total == len(cluster.nodes)


def test_gpus_held_on_a_node_the_cluster_no_longer_has_leave_the_rest_free() -> None:
    cluster = ClusterView.uniform(2, 4)
    held = {"node0": 0b0011, "gone": 0b1111}
    for blank in (None, Blank()):
        outside = FreeGPUs.outside(cluster, held, blank)
        assert outside.free == {"node0": {2, 3}, "node1": {0, 1, 2, 3}}
        assert outside.total == 6
