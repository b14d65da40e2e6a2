"""The Ray executor on a real three-node Ray cluster (fake GPUs), in a loopback-only netns.

One cluster serves every test: ``tests/ray_harness.py`` runs all scenarios in
one go inside the namespace and writes what it saw; each test here judges
one scenario. Ray advertises the machine's own address, so it must never run
outside a namespace that has only loopback.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# The harness mostly waits on Ray; on a loaded machine its setup alone can pass the
# suite-wide 300 s (it has its own 600 s limit on the subprocess).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(700)]
ROOT = Path(__file__).resolve().parent.parent


def _raylets() -> set[int]:
    out = subprocess.run(["pgrep", "-f", "raylet"], capture_output=True, text=True).stdout
    return {int(p) for p in out.split()}


def _usable() -> str | None:
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return "needs root and iproute2 for a network namespace"
    try:
        import ray  # noqa: F401
    except ImportError:
        return "Ray is not installed (pip install 'ringleader[ray]')"
    return None


@pytest.fixture(scope="module")
def seen(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    why = _usable()
    if why is not None:
        pytest.skip(why)
    ns = f"rlray{os.getpid()}"
    out = tmp_path_factory.mktemp("ray") / "seen.json"
    before = _raylets()
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"], check=True)
        run = subprocess.run(
            ["ip", "netns", "exec", ns, sys.executable, "-m", "tests.ray_harness", str(out)],
            cwd=ROOT,
            env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"},
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert out.exists(), run.stdout[-3000:] + run.stderr[-3000:]
        data: dict[str, Any] = json.loads(out.read_text())
        data["raylets_left"] = sorted(_raylets() - before)
        yield data
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)


def _ok(seen: dict[str, Any], name: str) -> dict[str, Any]:
    part = seen[name]
    assert "error" not in part, part.get("error")
    result: dict[str, Any] = part
    return result


def test_nodes_and_gpus_come_from_the_ray_cluster(seen: dict[str, Any]) -> None:
    assert seen["cluster"]["executor"] == "ray"
    assert sorted(n["gpus"] for n in seen["cluster"]["nodes"]) == [1, 2, 2]
    # Two nodes removed later: the server started afterwards sees only the head.
    assert [n["gpus"] for n in seen["cluster_after"]["nodes"]] == [1]
    # A node that joins shows up at the running server's next decision.
    joined = _ok(seen, "cluster_joined")
    assert sorted(n["gpus"] for n in joined["nodes"]) == [1, 2]


def test_a_gang_runs_torch_distributed_across_two_ray_nodes(seen: dict[str, Any]) -> None:
    resize = _ok(seen, "resize")
    nodes = {d.split(":")[0] for d in resize["devices"]}
    assert len(resize["devices"]) == 4 and len(nodes) == 2  # no node has 4 GPUs
    at_four = [
        loss for w, loss in zip(resize["world_sizes"], resize["losses"], strict=True) if w == 4
    ]
    assert len(at_four) > 10 and all(loss == loss for loss in at_four)  # trained, no NaN


def test_a_job_is_resized_1_2_4_across_nodes_and_its_loss_curve_continues(
    seen: dict[str, Any],
) -> None:
    resize = _ok(seen, "resize")
    assert [s["world_size"] for s in resize["starts"]] == [1, 2, 4]
    steps = resize["steps"]
    assert steps == sorted(steps) and len(set(steps)) == len(steps)
    for stop, start in zip(resize["stops"], resize["starts"][1:], strict=True):
        assert start["restored_step"] == stop["step"]
        curve = list(zip(steps, resize["losses"], strict=True))
        before = [loss for s, loss in curve if s <= stop["step"]]
        after = [loss for s, loss in curve if s > stop["step"]]
        mean_before = sum(before[-10:]) / len(before[-10:])
        mean_after = sum(after[:10]) / len(after[:10])
        assert abs(mean_after - mean_before) < 0.5 * mean_before + 0.1


def test_losing_a_node_restarts_its_job_from_a_checkpoint_elsewhere(seen: dict[str, Any]) -> None:
    loss = _ok(seen, "node_loss")
    assert loss["state"] == "succeeded"
    assert loss["attempts"] == 0  # a lost node is not the job's failure
    assert loss["events"].count("launched") == 2 and "stopped" in loss["events"]
    second = loss["starts"][1]
    assert 0 < second["restored_step"] <= loss["step_before"] + 20
    generations = loss["generations"]
    assert generations == sorted(generations)  # never two copies at once


def test_a_rank_that_fails_on_ray_is_charged_to_the_jobs_retries(seen: dict[str, Any]) -> None:
    crash = _ok(seen, "crash")
    assert crash["state"] == "failed", crash
    assert crash["events"].count("launched") == 2, crash  # the first run and one retry
    assert "stopped" not in crash["events"], crash  # never taken for a node's loss


def test_two_jobs_time_slice_one_ray_gpu(seen: dict[str, Any]) -> None:
    jobs = _ok(seen, "time_slicing")
    assert len(jobs) == 2
    devices = [tuple(map(tuple, j["devices"][0])) for j in jobs.values()]
    assert devices[0] == devices[1]  # the same GPU
    for job in jobs.values():
        assert job["state"] == "succeeded"
        assert "suspend_requested" in job["events"]
    a, b = (j["spans"] for j in jobs.values())
    shared = sum(max(0.0, min(e1, e2) - max(s1, s2)) for s1, e1 in a for s2, e2 in b)
    assert shared < 0.5


def test_the_harness_leaves_no_ray_process_behind(seen: dict[str, Any]) -> None:
    assert seen["raylets_left"] == []
