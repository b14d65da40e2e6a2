"""Pieces the benchmark scripts share (run as ``python bench/NAME.py``)."""

from __future__ import annotations

import sys
import time
from typing import Any


def wait_until(check: Any, timeout: float = 300.0, poll_s: float = 0.02) -> Any:
    """``check()``'s first truthy value, polled every ``poll_s`` up to ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(poll_s)
    raise TimeoutError("benchmark step timed out")


def resnet_command(
    depth: int, batch: int, epochs: float, examples_per_epoch: int | None = None
) -> list[str]:
    """The reference CIFAR ResNet job, checkpointing only when asked."""
    examples = (
        [] if examples_per_epoch is None else ["--examples-per-epoch", str(examples_per_epoch)]
    )
    return [
        sys.executable,
        "-m",
        "ringleader.workloads.resnet",
        "--depth",
        str(depth),
        "--batch",
        str(batch),
        *examples,
        "--epochs",
        str(epochs),
        "--checkpoint-every-s",
        "1e9",
    ]
