"""``ringleader.Client`` against a real server: typed replies, refusals, paging, retries."""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ringleader import Client
from ringleader.client import ApiError, NotRingleader, Unreachable
from ringleader.runtime.http.schemas import Job, JobSummary, JobWithEvents
from ringleader.runtime.workers.executor.local import free_port
from tests.live_server import LiveServer

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).parents[1] / "examples" / "sdk.py"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = LiveServer(tmp_path_factory.mktemp("sdk"), 2, 1.0).start()
    yield live
    live.stop()
    live.kill_workers()


@pytest.fixture
def rl(server: LiveServer) -> Iterator[Client]:
    with Client(server.url, server.token) as client:
        yield client


def test_submit_wait_logs_and_the_typed_replies(rl: Client) -> None:
    job = rl.submit({"name": "sdk", "command": ["sh", "-c", "echo one; echo two"]})
    assert isinstance(job, Job) and job.user == "admin" and job.state == "queued"
    done = rl.wait(job.id[:6], timeout=60)  # a prefix will do
    assert isinstance(done, JobWithEvents) and done.state == "succeeded"
    assert [e.kind for e in done.events][:2] == ["submitted", "launched"]
    assert rl.logs(job.id, tail=1) == "two\n"
    assert rl.whoami().admin and rl.cluster().gpus == 2
    assert "ringleader_jobs" in rl.metrics()


def test_refusals_say_what_and_where(rl: Client) -> None:
    with pytest.raises(ApiError) as bad:
        rl.submit({"name": "x", "command": ["true"], "gpus": "2"})
    assert bad.value.status == 422 and bad.value.problems[0][0] == "gpus"
    with pytest.raises(ApiError) as missing:
        rl.job("no-such-job")
    assert missing.value.status == 404 and "no-such-job" in str(missing.value)
    with pytest.raises(ValueError):
        rl.job(" ")


def test_jobs_follows_every_page_and_filters(rl: Client) -> None:
    made = [rl.submit({"name": f"page{i}", "command": ["sleep", "30"]}).id for i in range(5)]
    listed = [j.id for j in rl.jobs(page=2)]
    assert all(isinstance(j, JobSummary) for j in rl.jobs(page=2))
    assert listed[-5:] == made  # in submission order, across three pages
    newest = next(rl.jobs(newest_first=True, page=1))
    assert newest.id == made[-1]
    assert rl.set_priority(made[0], -5).spec == {**(rl.job(made[0]).spec or {}), "priority": -5}
    for job_id in made:
        assert rl.cancel(job_id).id == job_id  # asked: the controller stops it next
    assert {rl.wait(job_id, timeout=60, poll_s=0.2).state for job_id in made} == {"cancelled"}
    assert {j.id for j in rl.jobs(state="cancelled")} >= set(made)


def test_connecting_is_retried_until_the_server_is_up(tmp_path: Path) -> None:
    live = LiveServer(tmp_path / "late", 1)  # its port is chosen now, its process later
    starter = threading.Timer(1.0, live.start)
    starter.start()
    try:
        with Client(live.url, "rl_not-checked-by-health", retries=6) as rl:
            started = time.monotonic()
            assert rl.health().ok  # answered once the server came up, ~1-3 s later
            assert time.monotonic() - started >= 0.5
    finally:
        starter.join()
        live.stop()
    with (
        Client(f"http://127.0.0.1:{free_port()}", "x", retries=0) as nobody,
        pytest.raises(Unreachable),
    ):
        nobody.health()


def test_something_that_is_not_ringleader_is_named(tmp_path: Path) -> None:
    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(404)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(b"<html>not here</html>")

        def log_message(self, *args: object) -> None:
            pass

    web = http.server.HTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=web.serve_forever, daemon=True).start()
    try:
        with Client(f"http://127.0.0.1:{web.server_port}", "x") as rl, pytest.raises(NotRingleader):
            rl.whoami()
    finally:
        web.shutdown()


def test_the_documented_example_runs(server: LiveServer) -> None:
    env = {**os.environ, "RINGLEADER_URL": server.url, "RINGLEADER_TOKEN": server.token}
    out = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, env=env, timeout=300
    )
    assert out.returncode == 0, out.stderr
    assert "succeeded: hello from a ringleader job" in out.stdout
    assert "metrics: ringleader_queue_wait_seconds_count" in out.stdout
