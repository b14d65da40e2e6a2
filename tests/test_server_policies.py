"""Every policy `ringleader policies` marks as served runs a real job to success on the server.

And the ones it cannot serve (oracles) are refused at start-up, in one line,
before a single job is accepted.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ringleader.policy.catalog import POLICY_NAMES, policy_named
from ringleader.spine.needs import served_by_runtime
from tests.live_server import LiveServer, tiny_job

SERVED = [name for name in POLICY_NAMES if served_by_runtime(policy_named(name))]
REFUSED = [name for name in POLICY_NAMES if name not in SERVED]
WIDTH = {"two": 2, "four": 4, "eight": 8}
"""Fixed-size policies run every job at their size: the server needs that many devices."""


@pytest.fixture
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LiveServer]:
    name: str = request.param
    live = LiveServer(tmp_path / name, WIDTH.get(name, 2), 1.0, "--policy", name)
    try:
        yield live.start()
    finally:
        live.stop()
        live.kill_workers()


def test_only_oracles_are_refused() -> None:
    assert "srtf-oracle" in REFUSED
    assert all(policy_named(name).needs.oracle for name in REFUSED)
    assert {"precompute", "optimus", "exploratory", "gandiva", "ringleader"} <= set(SERVED)


@pytest.mark.slow
@pytest.mark.parametrize("server", SERVED, indirect=True)
def test_each_served_policy_runs_a_real_job_to_success(server: LiveServer) -> None:
    job_id = server.submit(tiny_job("small", epochs=1, elastic=True, max_gpus=2))
    job = server.wait_state(job_id, {"succeeded", "failed", "cancelled"}, timeout=120)
    assert job["state"] == "succeeded", (job["error"], job["events"][-5:])
    assert job["epoch"] >= 1.0
    assert job["counts"].get("start") == 1


@pytest.mark.parametrize("name", REFUSED)
def test_an_oracle_is_refused_at_start_up_with_the_reason(name: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [
            *(sys.executable, "-m", "ringleader", "server", "--policy", name),
            *("--state-dir", str(tmp_path), "--port", "1"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "oracle" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "ringleader.db").exists()
