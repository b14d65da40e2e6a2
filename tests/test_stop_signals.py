"""Stopping the way the ecosystem expects: SIGTERM, a grace period, then SIGKILL.

Scripts here use nothing from ringleader. Cancel gives a script's SIGTERM
handler time to save its state; a script that ignores SIGTERM is killed once
its ``stop_grace_s`` is over; an elastic script in torchrun's convention
(checkpoint on SIGTERM, resume when ``TORCHELASTIC_RESTART_COUNT > 0``) is
resized by the real server and goes on from its own checkpoint.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ringleader.runtime.workers.executor.local import free_port
from tests.live_server import LiveServer, serving, wait_for

pytestmark = pytest.mark.slow

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    yield from serving(tmp_path_factory.mktemp("signal-server"), 2)


def _script(tmp_path: Path, name: str) -> Path:
    shutil.copy(DATA / name, tmp_path / name)
    return tmp_path


def _kinds(server: LiveServer, job_id: str) -> list[str]:
    return [e["kind"] for e in server.job(job_id)["events"]]


def test_cancel_sends_sigterm_and_the_handler_runs_before_any_kill(
    server: LiveServer, tmp_path: Path
) -> None:
    workdir = _script(tmp_path, "term_handler.py")
    spec = {
        "name": "saver",
        "command": ["python", "term_handler.py"],
        "gpus": 2,
        "workdir": str(workdir),
        "stop_grace_s": 20,
    }
    job_id = server.submit(spec)
    wait_for(lambda: all((workdir / f"up{r}").exists() for r in (0, 1)), 60, "both ranks up")
    asked = time.time()
    server.cancel(job_id)
    job = server.wait_state(job_id, {"cancelled", "failed", "succeeded"}, 30)
    assert job["state"] == "cancelled"
    for rank in (0, 1):
        termed = float((workdir / f"term{rank}").read_text())
        saved = float((workdir / f"saved{rank}").read_text())
        assert asked <= termed < asked + 5  # SIGTERM at once, not at the grace's end
        assert saved - termed >= 1.0  # the handler ran to its end: nothing killed it
    # The controller settled it within seconds of the exits, not at the 20 s grace.
    assert job["finished_at"] - asked < 10
    stop = next(e for e in server.job(job_id)["events"] if e["kind"] == "stop_requested")
    assert stop["signal"] is True and stop["reason"] == "cancel"


def test_a_script_that_ignores_sigterm_is_killed_after_its_grace(
    server: LiveServer, tmp_path: Path
) -> None:
    workdir = _script(tmp_path, "term_handler.py")
    spec = {
        "name": "deaf",
        "command": ["python", "term_handler.py", "--deaf"],
        "workdir": str(workdir),
        "stop_grace_s": 2,
    }
    job_id = server.submit(spec)
    wait_for(lambda: (workdir / "up0").exists(), 60, "the rank up")
    pid = int((workdir / "up0").read_text())
    asked = time.monotonic()
    server.cancel(job_id)
    job = server.wait_state(job_id, {"cancelled", "failed", "succeeded"}, 30)
    took = time.monotonic() - asked
    assert job["state"] == "cancelled"
    assert 2.0 <= took < 10  # the grace, then SIGKILL: not the old 60 s
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
    assert not (workdir / "term0").exists()


def test_an_unaware_elastic_script_is_resized_through_sigterm_and_resumes_its_checkpoint(
    server: LiveServer, tmp_path: Path
) -> None:
    workdir = _script(tmp_path, "elastic_torchrun.py")
    spec = {
        "name": "unaware",
        "command": ["python", "elastic_torchrun.py", "60"],
        "elastic": True,
        "min_gpus": 1,
        "max_gpus": 2,
        "gpus": 2,
        "workdir": str(workdir),
    }
    job_id = server.submit(spec)
    steps = workdir / "steps.jsonl"

    def rows() -> list[dict[str, float]]:
        return (
            [json.loads(line) for line in steps.read_text().splitlines()] if steps.exists() else []
        )

    wait_for(lambda: len(rows()) > 10 and server.job(job_id)["gpus"] == 2, 90, "2 ranks training")
    # Another job arrives: the elastic one gives up a GPU for it.
    other = server.submit({"name": "other", "command": ["sleep", "8"], "workdir": str(workdir)})
    job = server.wait_state(job_id, {"succeeded", "failed"}, 240)
    assert job["state"] == "succeeded", job.get("error")
    assert server.job(other)["state"] == "succeeded"
    assert job["resizes"] >= 1
    kinds = _kinds(server, job_id)
    assert "stopped" in kinds and "failed" not in kinds and job["attempts"] == 0
    seen = rows()
    assert [r["step"] for r in seen] == list(range(1, 61))  # no step lost, none repeated
    worlds = {(r["restart"], r["world"]) for r in seen}
    assert (0, 2) in worlds and any(restart > 0 and w == 1 for restart, w in worlds)


def test_a_sigterm_the_moment_the_pid_is_published_is_handed_on(tmp_path: Path) -> None:
    # The controller signals a worker by the pid its wrapper publishes. Killed in
    # the gap before its handler existed, the wrapper left no exit file and no
    # worker, and the stop waited out its whole grace (a 30 s stall in a resize).
    for attempt in range(5):
        job_dir = tmp_path / f"job{attempt}"
        wrapper = subprocess.Popen(
            [
                *(
                    sys.executable,
                    "-m",
                    "ringleader.runtime.workers.launch",
                    "--job-dir",
                    str(job_dir),
                ),
                *("--generation", "1", "--rank", "0", "--die-with-parent", "--", "sleep", "30"),
            ]
        )
        pid_file = job_dir / "run" / "gen000001" / "rank0.pid"
        deadline = time.monotonic() + 30
        while not pid_file.exists() and time.monotonic() < deadline:
            pass
        os.kill(wrapper.pid, signal.SIGTERM)
        wrapper.wait(timeout=30)
        exit_file = pid_file.with_suffix(".exit")
        assert exit_file.exists(), f"attempt {attempt}: the wrapper died without handing it on"
        assert exit_file.read_text().strip() == str(-signal.SIGTERM)  # the worker got it


RENDEZVOUS = """
from ringleader.job import Session
s = Session.from_env(examples_per_epoch=64, batch_per_worker=8, epochs=1)
print("meeting", flush=True)
s.start()
print("met", flush=True)
"""


def test_a_rank_waiting_for_peers_that_were_stopped_dies_of_sigterm(tmp_path: Path) -> None:
    # Rank 1 of 2 with no rank 0 to meet: torch retries its connect in C++, where a
    # stop-at-the-next-boundary handler never runs. Stopped here, it must end at
    # once, not after the stop's grace (a resize during a cold start took 30 s).
    env = {
        **os.environ,
        "RINGLEADER_JOB_DIR": str(tmp_path),
        "RANK": "1",
        "WORLD_SIZE": "2",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),  # nobody listens
    }
    rank = subprocess.Popen(
        [sys.executable, "-c", RENDEZVOUS], env=env, stdout=subprocess.PIPE, text=True
    )
    assert rank.stdout is not None and rank.stdout.readline() == "meeting\n"
    time.sleep(2)  # inside init_process_group, retrying its connect
    os.kill(rank.pid, signal.SIGTERM)
    try:
        code = rank.wait(timeout=10)
    finally:
        rank.kill()
    assert code == -signal.SIGTERM
