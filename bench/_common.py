"""Pieces the benchmark scripts share (run as ``python bench/NAME.py``)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

ROOT = Path(__file__).resolve().parent.parent
CODE = (":(glob)bench/*.py",)
"""Besides src/, the code whose changes make a measurement not the commit's (not results)."""


def calibration_s(repeats: int = 3) -> float:
    """Median seconds of a fixed pure-Python loop: how fast this machine is right now.

    Wall times from different days, or different machines, compare only as
    ratios to this (a loaded or throttled VM slows both alike).
    """
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        table: dict[int, int] = {}
        for i in range(3_000_000):
            table[i % 1000] = table.get(i % 1000, 0) + i * i
        times.append(time.perf_counter() - started)
    return round(sorted(times)[len(times) // 2], 3)


ENTRY = Path(sys.executable).parent / "ringleader"
"""The installed ``ringleader`` entry point, as a user's shell runs it."""


def timed_command(args: list[str], env: dict[str, str]) -> float:
    """Wall seconds of ``ringleader ARGS`` as a whole process; it must exit 0."""
    started = time.perf_counter()
    done = subprocess.run([str(ENTRY), *args], env=env, capture_output=True, text=True)
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"ringleader {' '.join(args)} exited {done.returncode}: {done.stderr}")
    return took


def calibrated(work: Callable[[], T]) -> tuple[T, float]:
    """``work()`` with the calibration loop run just before and just after it, the faster
    kept (a busy neighbour slows a loop, it never speeds one up): what ``work`` returned,
    and the loop's seconds to divide its time by. Beside the work, not once per file:
    on a machine whose speed moves by half within minutes, a loop minutes away says
    nothing about the run."""
    before = calibration_s()
    result = work()
    return result, min(before, calibration_s())


def commit() -> str | None:
    """The commit the benchmark measured (short hash; ``+dirty`` if its code has changes)."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", "src", *CODE],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return (head + "+dirty" if dirty else head) or None


def compiled() -> bool:
    """Whether this process runs the compiled hot path (``make compiled``)."""
    from ringleader.hotpath import in_use

    return in_use()


def results_file(name: str) -> Path:
    """``bench/results/NAME.json``; ``NAME-compiled.json`` where the compiled hot path
    runs, so a build never overwrites the pure-Python figures (the code CI runs)."""
    return ROOT / "bench" / "results" / (f"{name}-compiled.json" if compiled() else f"{name}.json")


def stamp(command: str) -> dict[str, Any]:
    """What every results file starts with: how to rerun it, the commit, when, how fast,
    and whether the compiled hot path ran."""
    return {
        "command": command,
        "commit": commit(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "calibration_s": calibration_s(),
        "compiled": compiled(),
    }


def trace_workload(name: str) -> tuple[Any, list[Any]]:
    """A bundled trace (``itp:cluster07``, ``gavel:…``) as the simulator plays it:
    the cluster its jobs recommend (nodes of 8 GPUs) and its jobs.

    The one way ``traces.py``, ``policies.py`` and ``regress.py`` build a trace
    workload, so their figures are of the same thing.
    """
    from ringleader.policy import ClusterView
    from ringleader.traces.jobs import GPUS_PER_NODE, recommended_gpus, to_sim_jobs
    from ringleader.traces.load import load_trace, resolve_trace

    path, fmt = resolve_trace(name)
    rows = load_trace(path, fmt)
    cluster = ClusterView.uniform(recommended_gpus(rows) // GPUS_PER_NODE, GPUS_PER_NODE)
    return cluster, to_sim_jobs(rows)


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
