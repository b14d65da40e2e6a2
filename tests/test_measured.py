"""A job model that is a measurement first: tables answer as measured (issue 57, item 1)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from ringleader.perf.efficiency import read_efficiency
from ringleader.perf.measured import read_measured_job
from ringleader.perf.placements import OutsideMeasurements, canonical, read_step_table
from ringleader.perf.profile_files import ProfileError
from ringleader.sim.pollux import DATA
from ringleader.sim.tabled import compact, tabled_profile

CIFAR10 = DATA / "traces" / "cifar10"


def _profile(tmp_path: Path, rows: str, validation: str | None = None) -> Path:
    folder = tmp_path / "app"
    folder.mkdir(exist_ok=True)
    (folder / "placements.csv").write_text("placement,local_bsz,step_time,sync_time\n" + rows)
    if validation is not None:
        (folder / "validation-64.csv").write_text(
            "progress,iteration,metric,grad_sqr,grad_var\n" + validation
        )
    return folder


def test_a_placement_is_one_measurement_whichever_node_the_ring_starts_on() -> None:
    assert canonical((2, 1, 1)) == canonical((1, 2, 1)) == canonical((1, 1, 2)) == (1, 1, 2)
    assert canonical((4, 0, 2)) == (2, 4)


def test_a_measured_placement_answers_with_its_measurement_and_linearly_between_batches(
    tmp_path: Path,
) -> None:
    table = read_step_table(_profile(tmp_path, "2,32,0.10,0.02\n2,64,0.30,0.06\n11,32,0.5,0.4\n"))
    assert table.times((2,), 32) == (0.10, 0.02)
    step, sync = table.times((2,), 48)
    assert step == pytest.approx(0.20) and sync == pytest.approx(0.04)


def test_a_curve_that_is_not_monotone_is_kept_as_measured(tmp_path: Path) -> None:
    rows = "1,32,0.10,0.0\n2,32,0.05,0.01\n3,32,0.20,0.1\n"
    table = read_step_table(_profile(tmp_path, rows))
    assert [table.times((g,), 32)[0] for g in (1, 2, 3)] == [0.10, 0.05, 0.20]


def test_an_unmeasured_placement_is_interpolated_between_measured_ones() -> None:
    table = read_step_table(CIFAR10)
    assert (1, 1, 1, 1, 1, 1) not in table.by_placement
    step, sync = table.times((1, 1, 1, 1, 1, 1), 128)
    assert math.isfinite(step) and 0 < sync < step
    # Between five and seven GPUs on as many nodes, as far as they were measured.
    neighbours = [table.times(p, 128)[0] for p in ((1, 1, 1, 1, 1), (1, 1, 1, 1, 1, 1, 1))]
    assert min(neighbours) * 0.5 < step < max(neighbours) * 2


def test_a_query_outside_the_measurements_is_an_error_not_an_extrapolation() -> None:
    table = read_step_table(CIFAR10)
    with pytest.raises(OutsideMeasurements, match="per-GPU batch"):
        table.times((4, 4), 5000)


def test_a_larger_batch_is_worth_more_steps_but_fewer_than_its_size_says() -> None:
    eff = read_efficiency(CIFAR10, 100)
    m0 = eff.smallest_batch
    assert eff.gain(m0, 0) == 1.0
    for epoch in (0, 50, 99):
        gain = eff.gain(8 * m0, epoch)
        assert 1.0 < gain < 8.0
    # At the smallest batch, the steps to finish are the progress target itself.
    assert eff.steps_to_finish(m0) == pytest.approx(eff.bounds[-1])
    assert eff.steps_to_finish(8 * m0) < eff.steps_to_finish(m0)


def test_a_gpus_share_beyond_its_largest_micro_batch_is_accumulated() -> None:
    job = read_measured_job(CIFAR10, epochs=100)
    assert job.max_micro_batch == 1024
    split = job.split(2, 4096)
    assert (split.micro_batch, split.accumulation, split.global_batch) == (1024, 1, 4096)
    # One GPU above the smallest batch accumulates at least once (Pollux's rule).
    assert job.split(1, 256).accumulation == 1
    assert job.split(1, job.smallest_batch).accumulation == 0
    # Accumulating costs the compute part of a step again, not the sync.
    step, sync = job.table.times((2,), 1024)
    assert job.iteration_s((2,), 4096) == pytest.approx(step + (step - sync))


def test_a_tabled_job_is_slower_spread_over_nodes_and_told_the_compact_placement() -> None:
    job = read_measured_job(CIFAR10, epochs=100)
    profile = tabled_profile(job, 256, max_gpus=16, per_node=4)
    assert compact(6, 4) == (4, 2)
    # Measured: small steps on two nodes of two take 2.5x those on one node of four.
    assert profile.seconds_on((2, 2)) > 2 * profile.seconds_on((4,))
    profile = tabled_profile(job, 2048, max_gpus=16, per_node=4)
    assert profile.step_times[6] == job.iteration_s((4, 2), 2048)
    # What an oracle policy is told is the table, not a fit of it.
    assert profile.speed_model.step_time(6) == profile.step_times[6]
    with pytest.raises(ProfileError, match="outside the measured range"):
        tabled_profile(job, 1 << 20, max_gpus=4, per_node=4)


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        ("4,32,-0.1,0.0\n", r"placements.csv:2: step_time -0.1 must be positive"),
        ("4,32,nan,0.0\n", r"placements.csv:2: step_time is 'nan'; give a finite number"),
        ("4,32,0.1,inf\n", r"placements.csv:2: sync_time is 'inf'"),
        ("4,32,0.1,0.2\n", r"placements.csv:2: sync_time 0.2 must be between 0 and step_time"),
        ("4,32,0.1,0.0\n4,x,0.1,0.0\n", r"placements.csv:3: local_bsz 'x' is not a number"),
        ("40,32,0.1,0.0\n", r"placements.csv:2: placement '40' must be digits 1-9"),
        ("", r"placements.csv: no measurements"),
    ],
)
def test_a_bad_profile_row_names_the_file_the_row_and_the_field(
    tmp_path: Path, rows: str, expected: str
) -> None:
    with pytest.raises(ProfileError, match=expected):
        read_step_table(_profile(tmp_path, rows))


def test_validation_rows_must_make_progress_and_have_sane_gradients(tmp_path: Path) -> None:
    folder = _profile(tmp_path, "1,32,0.1,0.0\n", "10,5,0,1,1\n5,10,0,1,1\n")
    with pytest.raises(ProfileError, match=r"validation-64.csv:3: progress 5 is below"):
        read_efficiency(folder, 1)
    (folder / "validation-64.csv").write_text("progress,grad_sqr,grad_var\n10,-1,1\n")
    with pytest.raises(ProfileError, match=r"validation-64.csv:2: grad_sqr -1 must not be neg"):
        read_efficiency(folder, 1)
    with pytest.raises(ProfileError, match="epochs 3 must be between 1 and 1"):
        (folder / "validation-64.csv").write_text("progress,grad_sqr,grad_var\n10,1,1\n")
        read_efficiency(folder, 3)
