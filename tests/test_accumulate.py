"""Gradient accumulation above ``per_gpu_max``: a step of micro-batches is one step.

A tiny model is trained through ``ringleader.elastic`` by an unchanged script
(``tests/data/accumulate_check.py``), once with each step taken as 2
micro-batches of ``k`` and once as one batch of ``2k``: the weights after
the same steps must agree to float tolerance, by one process and by two
ranks under torchrun, where the micro-batch that does not end a step must
not allreduce (``model.no_sync()``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

from ringleader.job.batching import BATCH_ENV, LaunchBatch

pytest.importorskip("torch")

CHECK = Path(__file__).parent / "data" / "accumulate_check.py"
K = 8


def _start(
    tmp_path: Path, name: str, batch: LaunchBatch, ranks: int, *args: str
) -> subprocess.Popen[str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("RINGLEADER_", "TORCHELASTIC_"))
    }
    env[BATCH_ENV] = batch.to_env()
    if ranks == 1:
        command = [sys.executable, str(CHECK), *args]
    else:
        torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
        command = [*torchrun, "--nproc-per-node", str(ranks), str(CHECK), *args]
    workdir = tmp_path / name
    workdir.mkdir()
    return subprocess.Popen(
        command, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _result(run: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = run.communicate(timeout=120)
    assert run.returncode == 0, err[-2000:]
    [line] = [s for s in out.splitlines() if s.startswith("result ")]
    found: dict[str, Any] = json.loads(line.removeprefix("result "))
    return found


def _runs(tmp_path: Path, ranks: int, *variants: tuple[str, ...]) -> list[dict[str, Any]]:
    """The whole batch at once, then each variant accumulated: all run side by side."""
    whole = 2 * K * ranks  # global_min: every step counts as one, so 64 examples end it
    at_once = LaunchBatch(whole, whole, per_gpu_max=2 * K, per_gpu=2 * K)
    split = LaunchBatch(whole, whole, per_gpu_max=K, per_gpu=K, accumulate=2)
    runs = [_start(tmp_path, "at-once", at_once, ranks)]
    runs += [_start(tmp_path, f"split-{i}", split, ranks, *v) for i, v in enumerate(variants)]
    return [_result(r) for r in runs]


def _same_weights(a: dict[str, Any], b: dict[str, Any]) -> None:
    for left, right in zip(a["weights"], b["weights"], strict=True):
        assert left == pytest.approx(right, rel=1e-9, abs=1e-12)
    # The noise estimator saw the whole step's gradient, over the whole step's examples.
    assert None not in a["noise"] and a["noise"] == pytest.approx(b["noise"], rel=1e-6)


def test_two_micro_batches_of_k_step_as_one_batch_of_2k_on_one_process(tmp_path: Path) -> None:
    at_once, split = _runs(tmp_path, 1, ())
    steps = 64 // (2 * K)
    assert at_once["steps"] == split["steps"] == steps  # a step of micro-batches counts once
    assert at_once["micro_batches"] == steps and split["micro_batches"] == 2 * steps
    # Over several steps with momentum: a held step taken, or a sum dropped, would show.
    _same_weights(at_once, split)
    assert split["scaled"].endswith(f"on 1 workers x {K} examples x 2 accumulated")
    assert "accumulated" not in at_once["scaled"]


def test_two_ranks_accumulate_without_an_allreduce_until_the_step_and_match(
    tmp_path: Path,
) -> None:
    # This script zeroes its gradients after each step: held there too, until the step.
    at_once, split = _runs(tmp_path, 2, ("--zero-grad", "after"))
    steps = 64 // (2 * K * 2)
    assert at_once["steps"] == split["steps"] == steps
    assert at_once["reduces"] == [1] * steps  # the comm hook's one bucket, every step
    assert split["reduces"] == [0, 1] * steps  # the first micro-batch under no_sync
    _same_weights(at_once, split)
    assert split["scaled"].endswith(f"on 2 workers x {K} examples x 2 accumulated")


def test_a_held_step_keeps_a_scheduler_quiet_either_side_and_a_closure_says_the_fix() -> None:
    import torch

    from ringleader.job.accumulate import Accumulation

    model = torch.nn.Linear(2, 1)
    for scheduler_first in (True, False):
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        if scheduler_first:
            scheduler = torch.optim.lr_scheduler.StepLR(opt, 1)
        held = Accumulation(opt, model, 2)
        if not scheduler_first:
            scheduler = torch.optim.lr_scheduler.StepLR(opt, 1)
        for index in range(2):
            with held.micro_batch(index):
                opt.zero_grad()
                model(torch.ones(1, 2)).sum().backward()
                opt.step()
            assert held.held == (index == 0)  # the first is held, the last steps
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # torch warns where a step was hidden from it
            scheduler.step()
    with pytest.raises(ValueError, match=r"raise the spec's batch\.per_gpu_max"):
        opt.step(lambda: 0.0)
