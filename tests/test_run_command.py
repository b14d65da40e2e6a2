"""`ringleader run` submits a command as it is, like srun: a plain DDP script, unchanged."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.live_server import LiveServer, run_cli

pytestmark = pytest.mark.slow

PLAIN_DDP = Path(__file__).parent / "data" / "plain_ddp.py"


@pytest.fixture(scope="module", params=["warm", "cold"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """A server that forks workers warm (the default), and one that starts each cold."""
    extra = () if request.param == "warm" else ("--no-warm-start",)
    live = LiveServer(tmp_path_factory.mktemp(f"run-{request.param}"), 2, 2.0, *extra).start()
    yield live
    live.stop()
    live.kill_workers()


def test_a_plain_ddp_script_runs_from_a_relative_path(server: LiveServer, tmp_path: Path) -> None:
    shutil.copy(PLAIN_DDP, tmp_path / "ddp.py")
    run = ("run", "--gpus", "2", "--wait", "--", "python", "ddp.py")
    out = run_cli(server.url, *run, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "rank 0/2 local 0 restart 0 in sync True" in out.stdout
    assert "succeeded" in out.stderr
    # Both ranks ran where the user submitted from.
    assert [(tmp_path / f"done{r}").read_text() for r in (0, 1)] == [str(tmp_path)] * 2
    job_id = out.stdout.splitlines()[0]
    job = server.job(job_id)
    assert job["spec"]["workdir"] == str(tmp_path) and job["name"] == "ddp"


def test_wait_exits_1_when_the_job_fails(server: LiveServer, tmp_path: Path) -> None:
    fails = ("run", "--wait", "--", "sh", "-c", "echo going down; exit 3")
    out = run_cli(server.url, *fails, cwd=tmp_path)
    assert out.returncode == 1 and "going down" in out.stdout and "failed" in out.stderr


@pytest.mark.parametrize(
    ("workdir", "reason"),
    [("relative/dir", "absolute"), ("/no/such/dir/here", "no such directory")],
)
def test_a_workdir_must_be_an_absolute_directory(
    server: LiveServer, workdir: str, reason: str
) -> None:
    spec = {"name": "w", "command": ["true"], "workdir": workdir}
    r = server.http.post("/jobs", json=spec, timeout=10)
    assert r.status_code == 422
    assert r.json()["detail"][0]["field"] == "workdir" and reason in r.json()["detail"][0]["reason"]


def test_env_reaches_every_worker_and_a_bad_one_is_refused(
    server: LiveServer, tmp_path: Path
) -> None:
    said = ("run", "--wait", "-e", "EPOCHS=30", "--env", "HOME", "--")
    out = run_cli(server.url, *said, "sh", "-c", 'echo "epochs=$EPOCHS"', cwd=tmp_path)
    assert out.returncode == 0 and "epochs=30" in out.stdout, out.stderr
    bad = run_cli(server.url, "run", "--env", "1X=2", "--", "true", cwd=tmp_path)
    assert bad.returncode == 2 and "--env '1X=2'" in bad.stderr


def test_ctrl_c_on_wait_cancels_the_job_as_srun_does(server: LiveServer, tmp_path: Path) -> None:
    env = {**os.environ, "RINGLEADER_URL": server.url, "COLUMNS": "200"}
    waiting = subprocess.Popen(
        [sys.executable, "-m", "ringleader", "run", "--wait", "--", "sleep", "120"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A shell's background job starts with SIGINT ignored, and so would this child
        # (Python then raises no KeyboardInterrupt): as at a terminal, it takes Ctrl-C.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert waiting.stdout is not None
    job_id = waiting.stdout.readline().strip()  # the id comes first, then the log
    server.wait_state(job_id, {"running"}, 60)
    waiting.send_signal(signal.SIGINT)
    _, err = waiting.communicate(timeout=60)
    assert waiting.returncode == 130, err
    assert f"Ctrl-C: cancelled {job_id}" in err and "Traceback" not in err
    assert server.wait_state(job_id, {"cancelled"}, 60)["state"] == "cancelled"
