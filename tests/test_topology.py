"""Racks: what spanning them costs a gang, and a place stage that avoids it (issue 61)."""

from __future__ import annotations

import dataclasses

import pytest

from ringleader.policy.catalog import policy_named
from ringleader.policy.model.views import ClusterView, Device
from ringleader.policy.place._incremental.free import FreeGPUs
from ringleader.policy.place.fewest_nodes import place_one
from ringleader.policy.place.racks import FewestRacks, place_in_racks
from ringleader.sim.engine import Simulator
from ringleader.sim.failures import FailureInputError
from ringleader.sim.topology import Topology
from tests.helpers import sized_job
from tests.test_failures import _gang


def _half_full() -> FreeGPUs:
    """Two racks of two 4-GPU nodes: rack0 has 4 + 1 GPUs free, rack1 3 + 3."""
    free = FreeGPUs(ClusterView.uniform(4, 4, nodes_per_rack=2))
    free.take("node1", [0, 1, 2])
    free.take("node2", [0])
    free.take("node3", [0])
    return free


def test_a_gang_goes_to_the_rack_that_holds_it_where_fewest_nodes_would_span_two() -> None:
    job = sized_job("j", 6)
    racks = ClusterView.uniform(4, 4, nodes_per_rack=2).node_racks
    blind = place_one(job, 6, _half_full())
    assert {racks[d.node] for d in blind} == {"rack0", "rack1"}  # node0's 4, then 2 more
    aware = place_in_racks(job, 6, _half_full(), racks)
    assert aware is not None and {d.node for d in aware} == {"node2", "node3"}
    assert list(aware) == sorted(aware)


def test_required_waits_for_a_rack_and_preferred_spans_two() -> None:
    job = sized_job("j", 7)
    racks = ClusterView.uniform(4, 4, nodes_per_rack=2).node_racks
    assert place_in_racks(job, 7, _half_full(), racks, required_within=8) is None
    spanned = place_in_racks(job, 7, _half_full(), racks)
    assert spanned is not None and len(spanned) == 7
    # Wider than any rack: it spans them even where racks are required.
    wide = place_in_racks(sized_job("w", 9), 9, _half_full(), racks, required_within=8)
    assert wide is not None and len(wide) == 9


def test_on_a_cluster_without_racks_it_places_as_fewest_nodes() -> None:
    cluster = ClusterView.uniform(3, 4)
    jobs = [sized_job("a", 6), sized_job("b", 2, at=1.0)]
    placed = FewestRacks().place({"a": 6, "b": 2}, jobs, cluster)
    assert sorted(len(v) for v in placed.values()) == [2, 6]
    assert all(isinstance(d, Device) for v in placed.values() for d in v)


def test_a_gang_on_two_racks_runs_at_the_speed_its_slowest_link_allows() -> None:
    topology = Topology(400.0, 100.0)
    assert topology.speed(0.3, 2) == pytest.approx(1 / (0.7 + 0.3 * 4))
    assert topology.speed(0.3, 1) == 1.0 and topology.speed(0.0, 5) == 1.0
    # 16 GPUs on racks of one 8-GPU node: it must span two.
    job = _gang(16, 10.0)
    cluster = ClusterView.uniform(2, 8, nodes_per_rack=1)
    alone = Simulator(policy_named("fifo"), cluster, [job]).run().summary.avg_jct_s
    syncing = dataclasses.replace(job, comm_share=0.3)
    sim = Simulator(policy_named("fifo"), cluster, [syncing], topology=topology)
    slowed = sim.run().summary.avg_jct_s
    assert slowed - 600 == pytest.approx((alone - 600) * 1.9)  # 600 s: its start-up
    unracked = Simulator(policy_named("fifo"), cluster, [job], topology=topology).run()
    assert unracked.summary.avg_jct_s == pytest.approx(alone)  # comm_share 0: no cost


@pytest.mark.parametrize(
    ("fields", "name"),
    [
        ({"within_rack_gbps": 0.0}, "within_rack_gbps"),
        ({"across_racks_gbps": float("nan")}, "across_racks_gbps"),
        ({"within_rack_gbps": 100.0, "across_racks_gbps": 400.0}, "across_racks_gbps"),
    ],
)
def test_bandwidths_that_cannot_be_are_refused_by_name(fields: dict[str, float], name: str) -> None:
    with pytest.raises(FailureInputError, match=name):
        Topology(**fields)
