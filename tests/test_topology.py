"""Racks: what spanning them costs a gang, and a place stage that avoids it (issue 61)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ringleader.policy.catalog import policy_named
from ringleader.policy.model.views import ClusterView, Device
from ringleader.policy.place._incremental.free import FreeGPUs
from ringleader.policy.place.fewest_nodes import place_one
from ringleader.policy.place.racks import FewestRacks, place_in_racks
from ringleader.sim.engine import Simulator
from ringleader.sim.failures import FailureInputError
from ringleader.sim.topology import Topology
from ringleader.sim.workload_file import load_workload
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


def _file(tmp_path: Path, **changes: object) -> Path:
    data: dict[str, object] = {
        "cluster": {"nodes": 64, "gpus_per_node": 8, "nodes_per_rack": 16},
        "topology": {"within_rack_gbps": 400, "across_racks_gbps": 100},
        "poisson": [
            {"model": "resnet110", "count": 60, "mean_gap_s": 900, "gpus": 64,
             "elastic": False, "comm_share": 0.3, "seed": 1},
            {"model": "resnet110", "count": 60, "mean_gap_s": 900, "gpus": 16,
             "elastic": False, "comm_share": 0.3, "seed": 2, "name_prefix": "small"},
        ],
    }  # fmt: skip
    data.update(changes)
    path = tmp_path / "workload.json"
    path.write_text(json.dumps(data))
    return path


def _simulate(path: Path, policy: str = "ringleader") -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "ringleader", "simulate", "--workload", str(path)]
    cmd += ["--policy", policy, "--json", str(path.with_suffix(".out.json"))]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_a_workload_files_topology_places_gangs_within_racks_and_they_finish_sooner(
    tmp_path: Path,
) -> None:
    jct = {}
    for placement in ("blind", "preferred"):
        topology = {"within_rack_gbps": 400, "across_racks_gbps": 100, "placement": placement}
        path = _file(tmp_path, topology=topology)
        out = _simulate(path)
        assert out.returncode == 0, out.stderr
        jct[placement] = json.loads(path.with_suffix(".out.json").read_text())["summary"]
    assert jct["preferred"]["avg_jct_s"] < jct["blind"]["avg_jct_s"]
    workload = load_workload(_file(tmp_path))
    assert {j.comm_share for j in workload.jobs} == {0.3}
    assert len(set(workload.cluster.node_racks.values())) == 4  # racks of 16 nodes


@pytest.mark.parametrize(
    ("changes", "policy", "named"),
    [
        ({"topology": {"within_rack_gbps": 100, "across_racks_gbps": 400}}, "ringleader",
         "across_racks_gbps"),
        ({"topology": {"across_racks_gbps": -1}}, "ringleader", "topology.across_racks_gbps"),
        ({"cluster": {"nodes": 64, "gpus_per_node": 8}}, "ringleader", "nodes_per_rack"),
        ({"topology": {"placement": "required"}}, "ringleader", "poisson[0].gpus"),
        ({}, "sia", "topology.placement"),
    ],
)  # fmt: skip
def test_a_topology_that_cannot_be_exits_2_naming_the_field(
    tmp_path: Path, changes: dict[str, object], policy: str, named: str
) -> None:
    if changes.get("topology") == {"placement": "required"}:
        changes = {
            "cluster": {"nodes": 64, "gpus_per_node": 8, "nodes_per_rack": 4},
            "topology": {"placement": "required"},
        }
    out = _simulate(_file(tmp_path, **changes), policy)
    assert out.returncode == 2, out.stderr
    assert named in out.stderr and "Traceback" not in out.stderr
