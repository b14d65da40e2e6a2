"""The light elastic API: a torchrun DDP script ported in a few lines runs both ways.

``examples/porting/ddp_elastic.py`` is ``ddp.py`` with ``ringleader.elastic``:
under plain torchrun it trains as before; under ringleader it is resized
mid-run and goes on with the examples it has not seen, at the learning rate
its rule gives the new world size, written to its log.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ringleader.elastic import DataLoader, lr_factor
from tests.live_server import LiveServer, serving, wait_for

ROOT = Path(__file__).parent.parent
PORTING = ROOT / "examples" / "porting"
PAIRS = [("ddp.py", "ddp_elastic.py"), ("mnist.py", "mnist_elastic.py")]


def changed_lines(before: Path, after: Path) -> tuple[int, int]:
    """Non-blank lines the port adds and removes, from the unified diff itself."""
    diff = difflib.unified_diff(
        before.read_text().splitlines(), after.read_text().splitlines(), lineterm="", n=0
    )
    lines = [d for d in diff if not d.startswith(("+++", "---", "@@"))]
    added = sum(1 for d in lines if d.startswith("+") and d[1:].strip())
    removed = sum(1 for d in lines if d.startswith("-") and d[1:].strip())
    return added, removed


@pytest.mark.parametrize(("before", "after"), PAIRS)
def test_a_port_changes_at_most_10_lines_and_the_docs_say_how_many(before: str, after: str) -> None:
    added, removed = changed_lines(PORTING / before, PORTING / after)
    assert added <= 10 and removed <= 10
    docs = (ROOT / "docs" / "porting.md").read_text()
    assert f"`{after}`: +{added}/−{removed}" in docs  # the figure in the docs is this diff's


def test_every_rank_gets_its_own_share_and_a_resume_skips_what_was_seen() -> None:
    loader = DataLoader(list(range(100)), batch_size=4, shuffle=True, seed=3)
    whole = [loader.indices(0, 0, r, 2) for r in (0, 1)]
    assert not set(whole[0]) & set(whole[1]) and len(whole[0]) == len(whole[1]) == 48
    # 5 steps at world 2 (40 examples), then the rest at world 3.
    steps = zip(*(_steps(w, 4) for w in whole), strict=True)  # (rank 0's, rank 1's) per step
    order = [i for step in steps for batch in step for i in batch]
    rest = [loader.indices(0, 40, r, 3) for r in range(3)]
    seen = order[:40] + [i for r in rest for i in r]
    assert len(seen) == len(set(seen))  # nothing twice
    assert len(seen) == 40 + 60 // 12 * 12  # all but the tail that fills no whole step
    # What is left is counted for the world that resumes: a checkpoint after 96 of 100
    # examples leaves one step for one rank and none for two (then the epoch is done).
    assert loader.steps_left(96, 1) == 1 and loader.steps_left(96, 2) == 0
    assert [len(loader.indices(0, 96, r, 2)) for r in (0, 1)] == [0, 0]
    assert loader.steps_left(0, 3) == 100 // 12
    assert lr_factor("linear", 4) == 4 and lr_factor("sqrt", 4, base_world=1) == 2
    with pytest.raises(ValueError, match="none, linear, sqrt"):
        lr_factor("cubic", 2)


def _steps(indices: list[int], batch: int) -> list[list[int]]:
    return [indices[i : i + batch] for i in range(0, len(indices), batch)]


def test_the_port_runs_under_plain_torchrun(tmp_path: Path) -> None:
    shutil.copy(PORTING / "ddp_elastic.py", tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RINGLEADER_")}
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    out = subprocess.run(
        [*torchrun, "--nproc-per-node", "2", "ddp_elastic.py", "--epochs", "3"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "lr_rule 'linear' (tuned at 1 workers): 2 workers, learning rate x2 -> 0.1" in out.stdout
    assert re.findall(r"^epoch (\d)", out.stdout, re.M) == ["0", "1", "2"]


def test_the_mnist_port_runs_under_plain_python(tmp_path: Path) -> None:
    shutil.copy(PORTING / "mnist_elastic.py", tmp_path)
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("RINGLEADER_", "TORCHELASTIC_"))
    }
    out = subprocess.run(
        [
            sys.executable,
            "mnist_elastic.py",
            "--synthetic",
            "--size",
            "256",
            "--epochs",
            "2",
            "--test-batch-size",
            "64",
            "--log-interval",
            "2",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "lr_rule 'none' (tuned at 1 workers): 1 workers, learning rate x1 -> 1" in out.stdout
    assert out.stdout.count("test loss") == 2  # both epochs trained and tested


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    yield from serving(tmp_path_factory.mktemp("port-server"), 2)


@pytest.mark.slow
def test_the_port_is_resized_mid_run_under_ringleader(server: LiveServer, tmp_path: Path) -> None:
    shutil.copy(PORTING / "ddp_elastic.py", tmp_path)
    spec = {
        "name": "port",
        "command": ["python", "ddp_elastic.py", "--epochs", "5", "--sleep", "0.03"],
        "elastic": True,
        "min_gpus": 1,
        "max_gpus": 2,
        "gpus": 2,
        "workdir": str(tmp_path),
        "epochs": 5.0,
    }
    job_id = server.submit(spec)
    wait_for(
        lambda: server.job(job_id)["gpus"] == 2 and server.job(job_id)["step"] > 15,
        90,
        "2 ranks training",
    )
    other = server.submit({"name": "other", "command": ["sleep", "6"], "workdir": str(tmp_path)})
    job = server.wait_state(job_id, {"succeeded", "failed"}, 240)
    assert job["state"] == "succeeded", job.get("error")
    assert server.job(other)["state"] == "succeeded"
    assert job["resizes"] >= 1
    progress = server.progress(job_id)
    steps = [r["step"] for r in progress if "step_time" in r]
    assert steps == list(range(1, len(steps) + 1))  # none lost, none repeated
    worlds = [r["world_size"] for r in progress if "step_time" in r]
    assert 2 in worlds and 1 in worlds
    assert progress[-1]["event"] == "done" and max(r.get("epoch", 0) for r in progress) > 4.9
    log = server.http.get(f"/jobs/{job_id}/logs", params={"rank": 0}, timeout=10).text
    assert "2 workers, learning rate x2 -> 0.1" in log
    assert "1 workers, learning rate x1 -> 0.05" in log  # rescaled for the new world, and said
