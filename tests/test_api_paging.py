"""Listings page with a cursor and show summaries; jobs are named by unique id prefixes;
logs show their tail. The CLI does all of it through the API."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ringleader.client import Client
from tests.live_server import LiveServer, run_cli, serving

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    yield from serving(tmp_path_factory.mktemp("paging-server"), 1)


def test_pages_filters_and_summaries(server: LiveServer) -> None:
    users = [server.user("u0"), server.user("u1")]
    ids = [
        users[i % 2].post("/jobs", json={"name": f"p{i}", "command": ["sleep", "30"]}).json()["id"]
        for i in range(5)
    ]
    pages, params = [], {"limit": 2}
    while True:
        r = server.http.get("/jobs", params=params, timeout=10)
        assert r.status_code == 200
        pages.append([j["id"] for j in r.json()])
        assert all("spec" not in j for j in r.json())  # summaries: the spec is per job
        if "X-Next-Cursor" not in r.headers:
            break
        params = {"limit": 2, "cursor": r.headers["X-Next-Cursor"]}
    assert pages == [ids[:2], ids[2:4], ids[4:]]
    mine = server.http.get("/jobs", params={"user": "u1"}, timeout=10).json()
    assert [j["id"] for j in mine] == [ids[1], ids[3]]
    newest = server.http.get("/jobs", params={"order": "desc", "limit": 1}, timeout=10)
    assert [j["id"] for j in newest.json()] == [ids[4]]
    bad = server.http.get("/jobs", params={"state": "queued,lost"}, timeout=10)
    assert bad.status_code == 422 and bad.json()["detail"][0]["field"] == "state"
    assert "spec" in server.job(ids[0])

    short = run_cli(server.url, "jobs", "--limit", "2")
    assert short.returncode == 0 and ids[4] in short.stdout and ids[0] not in short.stdout
    assert "--all" in short.stdout  # says how to see the rest
    every = run_cli(server.url, "jobs", "--all", "--json")
    assert [j["id"] for j in json.loads(every.stdout)] == ids
    for job_id in ids:
        server.http.delete(f"/jobs/{job_id}", timeout=10)


def test_a_job_is_named_by_any_unique_prefix_of_its_id(server: LiveServer) -> None:
    one = server.submit({"name": "prefixjob-one", "command": ["sleep", "30"]})
    two = server.submit({"name": "prefixjob-two", "command": ["sleep", "30"]})
    assert server.http.get("/jobs/prefixjob-o", timeout=10).json()["id"] == one
    both = server.http.get("/jobs/prefixjob", timeout=10)
    assert both.status_code == 409 and "more than one" in both.json()["detail"]
    assert server.http.get("/jobs/prefixjob-x", timeout=10).status_code == 404
    assert server.http.get("/jobs/%25", timeout=10).status_code == 404  # no pattern
    shown = run_cli(server.url, "show", "prefixjob-t")
    assert shown.returncode == 0 and two in shown.stdout
    ambiguous = run_cli(server.url, "cancel", "prefixjob")
    assert ambiguous.returncode != 0 and "give more of it" in ambiguous.stderr
    assert run_cli(server.url, "cancel", "prefixjob-t").returncode == 0
    assert server.wait_state(two, {"cancelled", "succeeded", "failed"}, 30)["state"] == "cancelled"
    server.http.delete(f"/jobs/{one}", timeout=10)


def test_logs_tail_shows_the_newest_lines(server: LiveServer) -> None:
    script = "for i in range(5000): print('line', i)"
    job_id = server.submit({"name": "chatty", "command": ["python", "-c", script]})
    server.wait_state(job_id, {"succeeded", "failed"}, 60)
    out = run_cli(server.url, "logs", job_id, "--tail", "3")
    assert out.returncode == 0
    assert out.stdout.splitlines() == ["line 4997", "line 4998", "line 4999"]
    r = server.http.get(f"/jobs/{job_id}/logs", params={"tail": 1}, timeout=10)
    assert r.text == "line 4999\n" and int(r.headers["X-Log-Offset"]) > 40_000


def test_every_client_command_speaks_json_and_jobs_can_watch(server: LiveServer) -> None:
    job = json.loads(run_cli(server.url, "run", "--json", "--", "sleep", "30").stdout)
    assert job["spec"]["command"] == ["sleep", "30"] and job["user"] == "admin"
    assert json.loads(run_cli(server.url, "whoami", "--json").stdout)["admin"] is True
    assert "admin" in {
        u["name"] for u in json.loads(run_cli(server.url, "users", "list", "--json").stdout)
    }
    # Unbuffered, and stopped by SIGTERM: a shell's background job ignores SIGINT.
    env = {**os.environ, "RINGLEADER_URL": server.url, "COLUMNS": "200", "PYTHONUNBUFFERED": "1"}
    watching = subprocess.Popen(
        [sys.executable, "-m", "ringleader", "jobs", "--watch", "0.5"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    time.sleep(3)
    watching.send_signal(signal.SIGTERM)
    out, _ = watching.communicate(timeout=30)
    assert job["id"] in out and out.count("Ctrl-C stops") >= 2  # drawn again and again
    cancelled = json.loads(run_cli(server.url, "cancel", "--json", job["id"][:10]).stdout)
    assert cancelled["id"] == job["id"]
    made = json.loads(run_cli(server.url, "users", "add", "jsonny", "--json").stdout)
    assert made["name"] == "jsonny" and made["token"].startswith("rl_")
    rotated = json.loads(run_cli(server.url, "users", "token", "jsonny", "--json").stdout)
    assert rotated["token"] != made["token"]
    assert json.loads(run_cli(server.url, "users", "remove", "jsonny", "--json").stdout) == {
        "removed": "jsonny"
    }
    link = json.loads(run_cli(server.url, "dashboard", "--json").stdout)
    assert "/ui/login?ticket=" in link["url"]
    shown = json.loads(run_cli(server.url, "show", "--json", job["id"]).stdout)
    assert shown["id"] == job["id"] and "events" in shown
    pieces = run_cli(server.url, "logs", "--json", job["id"]).stdout.splitlines()
    assert all("text" in json.loads(line) for line in pieces)


def test_logs_follow_is_pushed_as_written_and_never_cut(server: LiveServer) -> None:
    """``logs -f`` streams from the server: a first line arrives while the job still
    runs, and a log past the 1 MiB a single read returns comes out whole."""
    script = (
        "import sys, time\n"
        "print('first', flush=True)\n"
        "time.sleep(4)\n"
        "for i in range(40000): print(f'bulk {i:06d} ' + 'x' * 40)\n"
        "print('last', flush=True)\n"
    )
    job_id = server.submit({"name": "follow", "command": ["python", "-c", script]})
    env = {**os.environ, "RINGLEADER_URL": server.url, "PYTHONUNBUFFERED": "1"}
    started = time.monotonic()
    following = subprocess.Popen(
        [sys.executable, "-m", "ringleader", "logs", "-f", "--raw", job_id],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert following.stdout is not None
    banner = following.stdout.readline()  # the wrapper's: generation, rank, device
    first = following.stdout.readline()
    assert banner.startswith("--- generation 1") and first == "first\n"
    assert server.job(job_id)["state"] == "running", "the first line came only at the end"
    rest, _ = following.communicate(timeout=120)
    assert following.returncode == 0
    log = (server.state_dir / "jobs" / job_id / "logs" / "rank0.log").read_text()
    assert len(log) > 2 * (1 << 20)
    assert banner + first + rest == log and rest.endswith("last\n")
    assert time.monotonic() - started < 60
    # The SDK follows the same stream; a finished job's stream ends once drained.
    with Client(server.url, token=server.token) as client:
        assert "".join(client.follow_logs(job_id, tail=1)) == "last\n"


def test_submit_names_the_file_and_field_the_server_refused(
    server: LiveServer, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\ncommand: [sleep, '1']\ngpus: -1\n")
    out = run_cli(server.url, "submit", str(bad))
    assert out.returncode == 2
    assert f"{bad}: invalid job spec" in out.stderr and "gpus" in out.stderr, out.stderr
    listed = run_cli(server.url, "submit", str(tmp_path / "missing.yaml"))
    assert listed.returncode == 2 and "missing.yaml" in listed.stderr
