"""The llm-cluster scenario: a pre-training gang among research jobs, nodes failing (issue 61)."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from ringleader.report.plots import failures_plot
from ringleader.scenarios.llm_cluster import (
    PLACEMENTS,
    GangMix,
    LlmCluster,
    Variant,
    research_mix,
    run_placements,
    run_variant,
)
from ringleader.sim.failures import FailureInputError, FailureModel


def test_the_research_mix_averages_kaloss_26_8_gpus_a_job_and_peaks_at_1024() -> None:
    jobs = research_mix(LlmCluster(research_jobs=4000, seed=1))
    sizes = [j.requested_gpus for j in jobs]
    assert statistics.fmean(sizes) == pytest.approx(26.8, rel=0.15)
    assert max(sizes) == 1024 and min(sizes) == 1


def test_young_daly_beats_a_fixed_3h_interval_and_spares_beat_waiting_for_repairs() -> None:
    # A 256-GPU gang for 20 days with every rate 40x Llama 3's: about a hundred
    # interruptions, as the 16k gang meets in a fortnight.
    setup = LlmCluster(gang_gpus=256, research_racks=4, days=20.0, research_jobs=40, seed=2)
    model = FailureModel()
    faster = FailureModel(model.gpu_per_hour * 40, model.node_per_hour * 40, 0.0)
    rows = {
        v.name: run_variant(setup, v, model=faster)
        for v in (Variant("yd"), Variant("3h", rule=3 * 3600.0), Variant("bare", spares=False))
    }
    expected = faster.expected_interruptions(256, 32, 20 * 24)
    assert abs(int(rows["yd"]["gang_interruptions"]) / expected - 1) < 0.35  # type: ignore[call-overload]
    assert rows["yd"]["gang_ettr"] > rows["3h"]["gang_ettr"] > rows["bare"]["gang_ettr"]  # type: ignore[operator]
    assert rows["yd"]["gang_ettr"] > 0.8  # type: ignore[operator]
    lost = rows["bare"]["gang_lost_h"]
    assert isinstance(lost, dict) and lost["queueing"] > lost["failure"]  # it waits out repairs


@pytest.mark.parametrize(
    ("fields", "name"),
    [
        ({"gang_gpus": 100}, "gang_gpus"),
        ({"days": -1.0}, "days"),
        ({"gang_checkpoint_s": float("nan")}, "gang_checkpoint_s"),
        ({"research_racks": 2}, "research_racks"),
    ],
)
def test_a_setting_that_cannot_be_is_refused_by_name(fields: dict[str, object], name: str) -> None:
    with pytest.raises(FailureInputError, match=name):
        LlmCluster(**fields)  # type: ignore[arg-type]


def test_placement_rules_are_compared_on_the_same_draws_and_plotted(tmp_path: Path) -> None:
    mix = GangMix(racks=4, nodes_per_rack=32, jobs=12, load=0.8)
    rows = run_placements(mix, seeds=2, processes=1)
    assert [r["placement"] for r in rows] == list(PLACEMENTS)
    assert rows[0]["over_blind"] == 1.0
    assert all(len(r["per_seed_h"]) == 2 for r in rows)  # type: ignore[arg-type]
    variant = run_variant(
        LlmCluster(gang_gpus=256, research_racks=4, days=2.0, research_jobs=5), Variant("yd")
    )
    out = failures_plot([variant], rows, tmp_path / "llm.png")
    assert out.stat().st_size > 10_000


def test_the_scenario_as_a_workload_file_loads_with_failures_and_racks() -> None:
    from ringleader.sim.workload_file import load_workload

    workload = load_workload(Path(__file__).parent.parent / "examples" / "llm-cluster.yaml")
    gang = workload.jobs[0]
    assert gang.requested_gpus == 16_384 and workload.cluster.capacity == 18_432
    research = workload.jobs[1:]
    assert statistics.fmean(j.requested_gpus for j in research) == pytest.approx(26.8)
    failures = workload.failures()
    assert failures is not None and failures.cost_s["pretrain-405b"] == 2.8
    assert workload.spec.topology is not None and workload.cluster.racked
