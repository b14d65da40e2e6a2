"""The gradient noise scale a job measures as it trains, and the batch it is launched with.

The estimator is checked on exact expectations, then for real: a classifier
trained through ``ringleader.elastic`` by one process and by two under
torchrun, its online estimate against one computed offline from every
example's own gradient at the same weights.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ringleader.job.batching import BATCH_ENV, LaunchBatch, gain, gradient_fields
from ringleader.job.noise import LEAST_VAR, SETTLED_STEPS, SMOOTHING, NoiseScale
from ringleader.perf.gradient import GradientReport, best_batch, split_share
from ringleader.perf.speed import SpeedModel

CHECK = Path(__file__).parent / "data" / "noise_check.py"


def test_the_estimator_recovers_the_gradient_and_its_variance_from_two_batches() -> None:
    true_sqr, trace = 0.5, 40.0  # |G|², tr Σ: a noise scale of 80 examples
    scale = NoiseScale()
    for small, big in ((16, 32), (16, 64), (8, 64)):
        # What each squared norm is worth on average: |G|² plus the noise at its batch.
        scale.observe(true_sqr + trace / small, true_sqr + trace / big, small, big)
    assert scale.grad_sqr == pytest.approx(true_sqr)
    assert scale.trace_var == pytest.approx(trace)
    assert scale.noise_scale == pytest.approx(80.0)


def test_a_step_with_one_batch_or_an_overflow_is_left_out_and_the_state_round_trips() -> None:
    scale = NoiseScale()
    scale.observe(1.0, 1.0, 16, 16)
    scale.observe(float("inf"), 1.0, 16, 32)
    assert scale.grad_sqr is None and scale.noise_scale is None
    scale.observe(3.0, 2.0, 16, 32)
    again = NoiseScale()
    again.load_state_dict(scale.state_dict())
    assert again.noise_scale == scale.noise_scale and again.noise_scale == pytest.approx(32.0)
    again.load_state_dict({})  # a checkpoint from before the noise was kept
    assert again.grad_sqr is None


def test_a_step_weighs_in_the_averages_as_the_steps_at_the_unit_its_examples_make() -> None:
    # AdaptDL's 0.999 ** scale: a step of ten times the unit's examples moves the
    # averages as ten steps at the unit would, and one at the unit as one.
    scale = NoiseScale(unit=32)
    scale.observe(3.0, 2.0, 16, 32)  # |G|² 1, tr Σ 32
    scale.observe(1.5, 1.05, 160, 320)  # |G|² 0.6, tr Σ 144
    first, second = 1 - SMOOTHING, 1 - SMOOTHING**10
    weights = (SMOOTHING**10 * first, second)
    expected = (weights[0] * 1.0 + weights[1] * 0.6) / sum(weights)
    assert scale.grad_sqr == pytest.approx(expected)
    steady = NoiseScale()  # no unit: every step one, whatever its examples
    steady.observe(3.0, 2.0, 16, 32)
    steady.observe(1.5, 1.05, 160, 320)
    assert steady.grad_sqr == pytest.approx((SMOOTHING * 1.0 + 0.6) / (1 + SMOOTHING))


def test_a_gradient_lost_in_the_noise_reads_as_zero_and_any_batch_is_worth_its_size() -> None:
    noisy = NoiseScale(unit=32)
    noisy.observe(1.0, 1.02, 16, 32)  # the larger batch's norm came out larger: tr Σ < 0
    assert noisy.trace_var == LEAST_VAR and noisy.grad_sqr == pytest.approx(1.04)
    scale = NoiseScale(unit=32)
    scale.observe(1.0, 0.4, 16, 32)  # |G|² = (32 * 0.4 - 16 * 1.0) / 16 < 0
    assert scale.grad_sqr == 0.0 and scale.trace_var == pytest.approx(19.2)
    assert scale.noise_scale == float("inf")
    assert gain(scale, 320, 32) == pytest.approx(10.0)  # AdaptDL's reading: linear
    report = GradientReport(0.0, 1.0, 32, 2048)
    assert report.noise_scale == float("inf")
    assert report.gains(np.asarray([320.0]))[0] == pytest.approx(10.0)  # the policy's too


def test_a_job_reports_its_gradient_once_the_averages_hold_enough_steps() -> None:
    scale = NoiseScale(unit=32)
    launched = LaunchBatch(32, 2048, 512, 16)
    for _ in range(SETTLED_STEPS - 1):
        scale.observe(3.0, 2.0, 16, 32)
    assert scale.grad_sqr is not None and gradient_fields(scale, 32, launched) == {}
    scale.observe(3.0, 2.0, 16, 32)
    said = gradient_fields(scale, 32, launched)
    assert said["grad_sqr"] == pytest.approx(1.0) and said["grad_var"] == pytest.approx(1.0)
    big = NoiseScale(unit=32)
    big.observe(3.0, 2.0, 16, 32 * SETTLED_STEPS)  # one step at thirty times the unit
    assert big.settled


def _run(command: list[str], tmp_path: Path) -> tuple[float, float]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("RINGLEADER_", "TORCHELASTIC_"))
    }
    out = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240
    )
    assert out.returncode == 0, out.stderr[-2000:]
    found = re.search(r"noise online=([\d.]+) offline=([\d.]+)", out.stdout)
    assert found is not None, out.stdout[-2000:]
    return float(found[1]), float(found[2])


@pytest.mark.parametrize("replicas", [1, 2])
def test_the_online_noise_scale_is_within_a_quarter_of_the_offline_one(
    replicas: int, tmp_path: Path
) -> None:
    if replicas == 1:
        command = [sys.executable, str(CHECK)]
    else:
        torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
        command = [*torchrun, "--nproc-per-node", str(replicas), str(CHECK)]
    online, offline = _run(command, tmp_path)
    assert offline > 1.0  # a classifier whose gradient is mostly noise at batch 1
    assert abs(online / offline - 1) <= 0.25


def test_adascales_gain_grows_with_the_batch_up_to_the_noise_scale() -> None:
    scale = NoiseScale()
    scale.observe(0.5 + 40.0 / 16, 0.5 + 40.0 / 32, 16, 32)  # noise scale 80
    assert gain(scale, 16, 16) == 1.0 and gain(NoiseScale(), 256, 16) == 1.0
    assert gain(scale, 32, 16) == pytest.approx((2.5 + 0.5) / (1.25 + 0.5))
    # Far past the noise scale a larger batch buys nothing more: the gain levels off.
    assert gain(scale, 1e6, 16) == pytest.approx(3.0 / 0.5, rel=1e-3)


def test_the_launch_batch_round_trips_through_its_variable_and_bad_text_names_it() -> None:
    batch = LaunchBatch(global_min=64, global_max=1024, per_gpu_max=128, per_gpu=96)
    assert LaunchBatch.from_env({BATCH_ENV: batch.to_env()}) == batch
    assert LaunchBatch.from_env({}) is None
    split = LaunchBatch(64, 1024, 128, per_gpu=96, accumulate=3)
    assert LaunchBatch.from_env({BATCH_ENV: split.to_env()}) == split
    assert split.share == 288 and split.global_batch(2) == 576
    # What a scheduler from before accumulation wrote still reads: one micro-batch a step.
    old = '{"global_min":64,"global_max":1024,"per_gpu_max":128,"per_gpu":96}'
    assert LaunchBatch.from_env({BATCH_ENV: old}) == batch and batch.accumulate == 1
    with pytest.raises(ValueError, match="accumulate must be at least 1"):
        LaunchBatch(64, 1024, 128, 96, accumulate=0)
    with pytest.raises(ValueError, match=BATCH_ENV):
        LaunchBatch.from_env({BATCH_ENV: '{"global_min": 1}'})
    with pytest.raises(ValueError, match="per_gpu 200 is outside"):
        LaunchBatch(64, 1024, 128, 200)


def _model(fixed: float, per_example: float) -> SpeedModel:
    """Step time ``fixed + per_example × (examples per GPU)``, on any count."""
    return SpeedModel(
        theta=np.array([per_example, 0.0, 0.0, 0.0, fixed]),
        algorithm="ring",
        grad_bytes=1e6,
        batch_per_worker=16,
        examples_per_epoch=50_000,
    )


def test_the_best_batch_weighs_the_gain_against_the_time_and_keeps_to_the_bounds() -> None:
    noisy = GradientReport(grad_sqr=0.01, grad_var=4.0, smallest_batch=16, largest_batch=4096)
    settled = GradientReport(grad_sqr=4.0, grad_var=0.01, smallest_batch=16, largest_batch=4096)
    model = _model(fixed=0.1, per_example=0.001)
    # A noise scale of 6,400 examples: a larger batch still helps, until its time tells.
    # Over every whole batch the best is 1,131 examples (566 per GPU); fifty tried come near.
    assert 520 <= best_batch(model, noisy, 2) <= 610
    # A share is per optimizer step, whatever one GPU holds at once (micro-batches
    # accumulate past that): alone, a GPU takes more than either of two does.
    assert 800 <= best_batch(model, noisy, 1) <= 900
    # Almost no noise: a larger batch is worth little more than the least one.
    assert best_batch(model, settled, 2) == 8
    assert best_batch(model, settled, 32) == 1  # the least share, where 16 split 32 ways


def test_a_share_above_what_a_gpu_holds_is_split_into_the_fewest_equal_micro_batches() -> None:
    assert split_share(64, 64) == (64, 1)  # fits at once: no accumulation
    assert split_share(65, 64) == (33, 2)  # 66: rounding up, never a ragged micro-batch
    assert split_share(566, 64) == (63, 9)  # Pollux's rule: ceil(566 / 64) micro-batches
    # 9 x 4 = 36 would pass the largest global batch's share of 35: 8 x 4 still holds
    # the least one, so it is taken; where it would not, the least one wins.
    assert split_share(34, 10, least=30, most=35) == (8, 4)
    assert split_share(34, 10, least=34, most=35) == (9, 4)
    with pytest.raises(ValueError, match="per_gpu_max >= 1"):
        split_share(34, 0)
