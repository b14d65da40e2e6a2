"""Every policy `ringleader policies` marks as served runs a real job to success on the server.

And the ones it cannot serve (oracles) are refused at start-up, in one line,
before a single job is accepted.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from ringleader.policy.catalog import POLICY_NAMES, policy_named
from ringleader.spine.needs import served_by_runtime
from tests.live_server import LiveServer, tiny_job

SERVED = [name for name in POLICY_NAMES if served_by_runtime(policy_named(name))]
REFUSED = [name for name in POLICY_NAMES if name not in SERVED]
WIDTH = {"two": 2}
"""Fixed-size policies run every job at their size: the server needs that many devices."""
COLD = ("--no-warm-start",)
"""Twelve servers started at once would each import torch into a warm fork server
while their one job starts: the test took 69 s with them and 56 s without on two
cores. Warm starts are the executor's, not the policy's; ``tests/test_warm.py``
runs them."""
NOT_LIVE = ("one", "four", "eight", "time-slicing", "no-sharing", "gavel-mmf-agnostic")
"""Served, but not run live here: each is another live policy with one number or flag
changed (checked below). ``one``, ``four`` and ``eight`` are ``two``'s stage with another
size (``FixedSize``): ``two`` runs the multi-rank fixed path, and their 13 more ranks,
each a torch process, were a third of the test's time on two cores. ``time-slicing``
is ``gandiva`` without packing, which a server with one job never tries, and
``no-sharing`` is ``gandiva`` with each of its mechanisms off;
``gavel-mmf-agnostic`` is ``gavel-mmf`` with the type speeds read as one."""
LIVE = [name for name in SERVED if name not in NOT_LIVE]


def test_only_oracles_are_refused() -> None:
    assert "srtf-oracle" in REFUSED
    assert all(policy_named(name).needs.oracle for name in REFUSED)
    assert {"precompute", "optimus", "exploratory", "gandiva", "ringleader"} <= set(SERVED)
    assert {"four", "eight"} <= set(SERVED)
    two = policy_named("two")
    for name, n in (("one", 1), ("four", 4), ("eight", 8)):  # run live as ``two`` (NOT_LIVE)
        assert policy_named(name) == replace(two, name=name, size=replace(two.size, size=n))
    gandiva = policy_named("gandiva")
    assert policy_named("time-slicing") == replace(gandiva, name="time-slicing", packing=False)
    off = {"time_slicing": False, "packing": False, "migration": False, "grow_shrink": False}
    assert policy_named("no-sharing") == replace(gandiva, name="no-sharing", **off)
    assert set(NOT_LIVE) <= set(SERVED) and not set(NOT_LIVE) & set(LIVE)


@pytest.mark.slow
def test_each_served_policy_runs_a_real_job_to_success(tmp_path: Path) -> None:
    # One server per policy, all at once: their jobs overlap instead of queueing
    # one test after another (the runtime path is the same, only the policy differs).
    servers = {
        name: LiveServer(tmp_path / name, WIDTH.get(name, 2), 1.0, "--policy", name, *COLD)
        for name in LIVE
    }
    try:
        for s in servers.values():
            s.launch()  # all at once: a server's start-up is mostly its imports
        for s in servers.values():
            s.ready()
        ids = {
            name: s.submit(tiny_job("small", epochs=1, elastic=True, max_gpus=2))
            for name, s in servers.items()
        }
        for name, s in servers.items():
            job = s.wait_state(ids[name], {"succeeded", "failed", "cancelled"}, timeout=240)
            assert job["state"] == "succeeded", (name, job["error"], job["events"][-5:])
            assert job["epoch"] >= 1.0, name
            assert job["counts"].get("start") == 1, name
    finally:
        for s in servers.values():
            s.terminate()
        for s in servers.values():
            s.stop()
            s.kill_workers()


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
