"""Failures, checkpoints and ETTR in the simulator (issue 61)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from ringleader.policy import policy_named
from ringleader.policy.model.views import ClusterView
from ringleader.scenarios.llm_cluster import gang
from ringleader.sim.engine import Simulator
from ringleader.sim.failures import (
    Checkpointing,
    FailureInputError,
    FailureModel,
    Failures,
    Outage,
    draw_outages,
    young_daly,
)
from ringleader.sim.submitted import SimJob
from ringleader.sim.workload_failures import FailuresSpec
from ringleader.sim.workload_file import load_workload

HOUR = 3600.0


def _gang(gpus: int, hours: float) -> SimJob:
    """A job of exactly ``gpus`` GPUs that needs ``hours`` of running at that size,
    starting and restarting in 600 s (the scenario's ``gang``)."""
    return gang(gpus, hours, "gang", 0.0, "", 600.0)


def _play(nodes: int, outages: list[Outage], rule: str | float = 3600.0) -> tuple[float, Failures]:
    cluster = ClusterView.uniform(nodes, 8)
    failures = Failures(outages, cluster, checkpointing=Checkpointing(rule, 60.0))
    sim = Simulator(policy_named("fifo"), cluster, [_gang(16, 10.0)], failures=failures)
    return sim.run().summary.avg_jct_s, failures


def test_the_default_rates_give_a_16k_gang_the_llama3_reports_419_interruptions() -> None:
    model = FailureModel()
    assert model.expected_interruptions(16_384, 2_048, 54 * 24) == pytest.approx(419)
    cluster = ClusterView.uniform(2_048, 8)
    drawn = draw_outages(model, cluster, 54 * 24 * HOUR, seed=3)
    unexpected = sum(not o.planned for o in drawn)
    assert abs(unexpected / 419 - 1) <= 0.15
    assert abs(sum(o.planned for o in drawn) / 47 - 1) <= 0.5


def test_young_daly_checkpoints_a_wider_gang_more_often() -> None:
    assert young_daly(60.0, 3 * HOUR) == pytest.approx(math.sqrt(2 * 60 * 3 * HOUR))
    rule, model = Checkpointing(), FailureModel()
    narrow = rule.interval_s(60.0, model, 64, 8)
    wide = rule.interval_s(60.0, model, 16_384, 2_048)
    assert wide < narrow / 10
    assert Checkpointing("never").interval_s(60.0, model, 64, 8) == math.inf


def test_a_failure_loses_the_progress_since_the_last_checkpoint_and_pays_a_restart() -> None:
    # 10 h of work on 16 GPUs of 3 nodes (one spare), a checkpoint of 60 s every hour of
    # progress. Ready at 600 s; node0 fails 2.5 checkpoint cycles in: 1,830 s of
    # progress since the last checkpoint is lost, and the job restarts on what is left.
    cycle = 3600.0 + 60.0
    at = 600.0 + 2.5 * cycle
    jct, failures = _play(3, [Outage(at, at + 4 * HOUR, ("node0",), "gpu")])
    lost = at - 600.0 - 2 * cycle
    assert lost == pytest.approx(1830.0)
    assert jct == pytest.approx(600 + 10 * HOUR * cycle / 3600 + 600 + lost * cycle / 3600)
    ledger = failures.ledgers["gang"]
    assert ledger.interruptions == 1 and ledger.by_cause == {"gpu": 1}
    assert ledger.useful_s == pytest.approx(10 * HOUR)
    assert ledger.lost_s["failure"] == pytest.approx(lost)
    assert ledger.lost_s["restart"] == pytest.approx(1200.0)
    assert ledger.ettr(0.0) == pytest.approx(10 * HOUR / jct)


def test_without_a_spare_node_the_gang_waits_for_the_repair() -> None:
    at = 5000.0
    jct, failures = _play(2, [Outage(at, at + 4 * HOUR, ("node0",), "node")])
    spared, _ = _play(3, [Outage(at, at + 4 * HOUR, ("node0",), "node")])
    assert jct == pytest.approx(spared + 4 * HOUR)
    assert failures.ledgers["gang"].lost_s["queueing"] == pytest.approx(4 * HOUR)


def test_a_planned_outage_checkpoints_first_and_is_not_an_interruption() -> None:
    at = 5000.0
    jct, failures = _play(3, [Outage(at, at + HOUR, ("node1",), "planned")])
    clean, _ = _play(3, [])
    assert jct == pytest.approx(clean + 600.0)  # only the restart
    assert failures.ledgers["gang"].interruptions == 0


def test_never_checkpointing_loses_everything_since_the_launch() -> None:
    at = 600.0 + 3 * HOUR
    jct, failures = _play(3, [Outage(at, at + HOUR, ("node0",), "gpu")], rule="never")
    assert jct == pytest.approx(600 + 3 * HOUR + 600 + 10 * HOUR)
    assert failures.ledgers["gang"].lost_s["failure"] == pytest.approx(3 * HOUR)


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: FailureModel(gpu_per_hour=-1.0), "gpu_per_hour"),
        (lambda: FailureModel(node_per_hour=math.nan), "node_per_hour"),
        (lambda: FailureModel(repair_s=math.inf), "repair_s"),
        (lambda: Checkpointing("weekly"), "checkpoint rule"),
        (lambda: Checkpointing(-5.0), "checkpoint interval"),
        (lambda: Checkpointing(cost_s=-1.0), "cost_s"),
    ],
)
def test_a_rate_or_cost_that_cannot_be_is_refused_by_name(make: object, field: str) -> None:
    with pytest.raises(FailureInputError, match=field):
        make()  # type: ignore[operator]


def _workload(tmp_path: Path, failures: dict[str, object]) -> Path:
    data = {
        "cluster": {"nodes": 8, "gpus_per_node": 8},
        "failures": failures,
        "poisson": [
            {"model": "resnet110", "count": 40, "mean_gap_s": 1800, "gpus": 8,
             "elastic": False, "checkpoint_s": 20},
        ],
    }  # fmt: skip
    path = tmp_path / "workload.json"
    path.write_text(json.dumps(data))
    return path


def _simulate(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "ringleader", "simulate", "--workload", str(path), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_a_workload_files_failures_section_fails_nodes_and_reports_their_cost(
    tmp_path: Path,
) -> None:
    path = _workload(tmp_path, {"gpu_per_hour": 0.002, "node_per_hour": 0.002, "seed": 3})
    out = _simulate(path, "--policy", "ringleader", "--json", str(tmp_path / "out.json"))
    assert out.returncode == 0, out.stderr
    report = json.loads((tmp_path / "out.json").read_text())["failures"]
    assert report["outages"] > 100 and report["interruptions"] >= 1
    assert 0.5 < report["ettr"] < 1.0 and report["lost_gpu_h"]["failure"] > 0
    workload = load_workload(path)
    assert workload.failures() is not workload.failures()  # fresh for every run
    assert load_workload(_workload(tmp_path, {})).spec.failures == FailuresSpec()


@pytest.mark.parametrize(
    ("failures", "field"),
    [
        ({"gpu_per_hour": -0.002}, "failures.gpu_per_hour"),
        ({"repair_s": "inf"}, "failures.repair_s"),
        ({"checkpoint": "weekly"}, "failures.checkpoint"),
        ({"checkpoint_cost_s": -1}, "failures.checkpoint_cost_s"),
        ({"rack_per_hour": 0.1}, "failures.rack_per_hour"),  # the cluster has no racks
    ],
)
def test_a_workload_files_bad_failure_setting_exits_2_naming_the_field(
    tmp_path: Path, failures: dict[str, object], field: str
) -> None:
    out = _simulate(_workload(tmp_path, failures), "--policy", "ringleader")
    assert out.returncode == 2, out.stderr
    assert field in out.stderr and "Traceback" not in out.stderr


def test_a_racks_switch_takes_every_node_of_it_out_at_once() -> None:
    cluster = ClusterView.uniform(8, 8, nodes_per_rack=4)
    racks = {"rack0": ["node0", "node1", "node2", "node3"], "rack1": ["node4", "node5"]}
    model = FailureModel(0.0, 0.0, 0.0, rack_per_hour=0.01)
    drawn = draw_outages(model, cluster, 1000 * HOUR, seed=1, racks=racks)
    assert drawn and all(o.cause == "rack" for o in drawn)
    assert {o.nodes for o in drawn} == {tuple(racks["rack0"]), tuple(racks["rack1"])}
    assert abs(len(drawn) / 20 - 1) < 0.5  # 2 racks x 1000 h x 0.01


def test_a_job_that_gives_its_own_interval_checkpoints_at_it(tmp_path: Path) -> None:
    at = 600.0 + 2.5 * (1800.0 + 60.0)
    cluster = ClusterView.uniform(3, 8)
    failures = Failures(
        [Outage(at, at + HOUR, ("node0",), "gpu")],
        cluster,
        checkpointing=Checkpointing(3600.0, 60.0),
        every_s={"gang": 1800.0},
    )
    Simulator(policy_named("fifo"), cluster, [_gang(16, 10.0)], failures=failures).run()
    assert failures.ledgers["gang"].lost_s["failure"] == pytest.approx(0.5 * 1860.0)
    data = {
        "cluster": {"nodes": 8, "gpus_per_node": 8, "nodes_per_rack": 4},
        "failures": {"rack_per_hour": 0.01},
        "jobs": [{"name": "a", "model": "resnet110", "gpus": 8, "checkpoint_every_s": 900}],
    }
    path = tmp_path / "w.json"
    path.write_text(json.dumps(data))
    made = load_workload(path).failures()
    assert made is not None and made.every_s == {"a": 900.0}
    assert any(o.cause == "rack" for o in made.outages)
