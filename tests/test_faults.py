"""Faults lose nothing and say what happened (issue 14, item 6).

Each against a real server process: the database deleted or replaced under
it, a state dir with job directories but no database, a full disk (a small
tmpfs, so these need root), and clients that stall half-way through a
request or open connections and say nothing.
"""

from __future__ import annotations

import errno
import json
import os
import select
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx
import pytest

from ringleader.runtime.http.timeouts import BACKSTOP_S, BODY_S, HEADERS_S
from ringleader.runtime.state.errors import StoreError
from ringleader.runtime.state.store import Store
from ringleader.runtime.workers.executor.local import free_port
from ringleader.runtime.workers.procs import alive
from tests.live_server import LiveServer, run_cli, wait_for

pytestmark = pytest.mark.slow

EXIT_WITHIN_S = 5.0
"""A server whose database is gone stops this soon (it looks once a second)."""
SAME_USER = ("--no-isolate-jobs",)
"""Jobs run as the server's user: these faults are the server's, whoever runs the jobs
(and a job run as another uid could not enter pytest's private temporary dirs)."""


def serving(state_dir: Path, gpus: int) -> LiveServer:
    """A started server on ``state_dir``; a later one on the same dir adopts its jobs."""
    return LiveServer(state_dir, gpus, 2.0).start()  # LiveServer passes --no-isolate-jobs


def sleeper(name: str, seconds: int = 300, **fields: Any) -> dict[str, Any]:
    return {"name": name, "command": ["sleep", str(seconds)], **fields}


def worker_of(state_dir: Path, job_id: str) -> tuple[int, int]:
    """The (pid, start ticks) of rank 0 of the job's newest generation, once it has started."""
    pattern = f"jobs/{job_id}/run/*/rank0.pid"
    wait_for(lambda: any(state_dir.glob(pattern)), 30, f"a worker of {job_id}")
    pid, ticks = (int(v) for v in sorted(state_dir.glob(pattern))[-1].read_text().split())
    return pid, ticks


def exits_within(live: LiveServer, seconds: float) -> tuple[int, float]:
    """The server's exit status and how long it took to exit, from now."""
    assert live.proc is not None
    start = time.monotonic()
    try:
        code = live.proc.wait(timeout=seconds + 10)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the server still runs {seconds + 10:.0f} s later") from None
    return code, time.monotonic() - start


def server_log(live: LiveServer) -> str:
    return (live.state_dir / "server.log").read_text(errors="replace")


# -- the database deleted or replaced under a running server -----------------


def test_a_deleted_database_stops_the_server_and_loses_no_job(tmp_path: Path) -> None:
    live = serving(tmp_path / "state", 1)
    db = live.state_dir / "ringleader.db"
    try:
        running = live.submit(sleeper("survivor"))
        waiting = live.submit(sleeper("waiter"))  # one GPU: this one stays queued
        live.wait_state(running, {"running"}, 60)
        worker = worker_of(live.state_dir, running)

        db.unlink()
        code, took = exits_within(live, EXIT_WITHIN_S)
        log = server_log(live)
        assert code == 2, log
        assert took < EXIT_WITHIN_S, took
        print(f"the server exited {took:.2f} s after its database went")
        assert f"{db} was deleted while the server ran" in log
        assert "start the server again" in log
        assert "Traceback" not in log
        assert alive(*worker), "the server's fault must not stop a running job"

        # Its last state is saved; its own WAL is set aside, not left to be
        # replayed into whatever file is put there next.
        (rescued,) = live.state_dir.glob("ringleader.db.rescued-*")
        assert str(rescued) in log
        assert not Path(f"{db}-wal").exists() and not Path(f"{db}-shm").exists()

        # Without the file, a new server refuses to start on an empty one.
        refused = start_refused(live.state_dir)
        assert "1 job directory but no database" in refused
        assert str(rescued) in refused
        assert not db.exists()

        rescued.rename(db)
        live = serving(live.state_dir, live.gpus)
        assert live.job(running)["state"] == "running"
        assert live.job(waiting)["state"] == "queued"
        assert worker_of(live.state_dir, running) == worker  # adopted, not relaunched
        assert alive(*worker)
    finally:
        live.stop()
        live.kill_workers()


def test_a_replaced_database_stops_the_server_and_a_backup_restores_it(tmp_path: Path) -> None:
    live = serving(tmp_path / "state", 1)
    db = live.state_dir / "ringleader.db"
    try:
        job = live.submit(sleeper("survivor"))
        live.wait_state(job, {"running"}, 60)
        worker = worker_of(live.state_dir, job)
        backup = tmp_path / "backup.db"
        with sqlite3.connect(db) as source, sqlite3.connect(backup) as copy:
            source.backup(copy)  # what an operator's backup would hold, WAL included
        source.close()
        copy.close()

        other = tmp_path / "other.db"
        with sqlite3.connect(other) as foreign:
            foreign.execute("CREATE TABLE notes (text TEXT)")
            foreign.execute("INSERT INTO notes VALUES ('not ringleader''s')")
        foreign.close()
        os.replace(other, db)

        code, took = exits_within(live, EXIT_WITHIN_S)
        log = server_log(live)
        assert code == 2, log
        assert took < EXIT_WITHIN_S, took
        print(f"the server exited {took:.2f} s after its database went")
        assert f"{db} was replaced by another file while the server ran" in log
        assert "move the new file aside" in log
        assert alive(*worker)
        # The new file is left as it was: the old server's WAL is not replayed into it.
        with sqlite3.connect(db) as check:
            tables = {r[0] for r in check.execute("SELECT name FROM sqlite_master")}
            notes = check.execute("SELECT text FROM notes").fetchall()
        check.close()
        assert tables == {"notes"} and notes == [("not ringleader's",)]

        db.rename(tmp_path / "set-aside.db")
        os.replace(backup, db)
        live = serving(live.state_dir, live.gpus)
        assert live.job(job)["state"] == "running"
        assert worker_of(live.state_dir, job) == worker
        assert alive(*worker)
    finally:
        live.stop()
        live.kill_workers()


def start_refused(state_dir: Path) -> str:
    """Start ``ringleader server`` on ``state_dir``; it must refuse (exit 2): what it said."""
    out = subprocess.run(
        [
            *(sys.executable, "-m", "ringleader", "server", "--gpus", "1"),
            *("--state-dir", str(state_dir), "--port", str(free_port()), *SAME_USER),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    assert "Traceback" not in out.stderr
    lines = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, out.stderr
    return lines[0]


def test_job_directories_without_a_database_refuse_to_start(tmp_path: Path) -> None:
    state = tmp_path / "state"
    (state / "jobs" / "resnet-1a2b3c4d" / "logs").mkdir(parents=True)
    (state / "jobs" / "bert-5e6f7a8b").mkdir()
    said = start_refused(state)
    assert "2 job directories but no database" in said
    assert "restore" in said and "from a backup" in said
    assert "aside to start afresh" in said
    assert not (state / "ringleader.db").exists()
    with pytest.raises(StoreError, match="2 job directories but no database"):
        Store(state / "ringleader.db")
    assert not (state / "ringleader.db").exists()


def test_a_write_ahead_log_without_its_database_is_not_replayed(tmp_path: Path) -> None:
    Store(tmp_path / "ringleader.db").close()
    crashed = sqlite3.connect(tmp_path / "ringleader.db")  # a server killed mid-write
    crashed.execute("PRAGMA wal_autocheckpoint=0")
    crashed.execute("INSERT INTO events (job_id, t, kind) VALUES ('x', 0, 'submitted')")
    crashed.commit()
    (tmp_path / "ringleader.db").unlink()  # then the database alone was deleted
    with pytest.raises(StoreError, match=r"write-ahead log .* is there: restore"):
        Store(tmp_path / "ringleader.db")
    assert not (tmp_path / "ringleader.db").exists()
    crashed.close()


# -- a full disk --------------------------------------------------------------


@contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A small file system of its own at ``path`` (root only), to fill to the last byte."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(
            "a full disk is a small tmpfs filled up, and mounting one needs root "
            f"(mount said: {mounted.stderr.strip() or mounted.returncode})"
        )
    try:
        yield path
    finally:
        subprocess.run(["umount", "--lazy", str(path)], check=False)


def fill(directory: Path) -> Path:
    """Write zeros to a file in ``directory`` until its disk is full; the file."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    deadline = time.monotonic() + 30
    try:
        for size in (1 << 20, 4096):
            block = bytes(size)
            while time.monotonic() < deadline:
                try:
                    os.write(fd, block)
                except OSError as err:
                    if err.errno != errno.ENOSPC:
                        raise
                    break
    finally:
        os.close(fd)
    assert os.statvfs(directory).f_bavail == 0, "the disk did not fill"
    return filler


def test_a_full_disk_answers_507_and_loses_nothing(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with tmpfs(state, "16m"):
        # The server's own log stays off the full disk, for the assertions.
        (state / "server.log").symlink_to(tmp_path / "server.log")
        live = serving(state, 1)
        try:
            first = live.submit(sleeper("first"))
            later = [live.submit(sleeper(f"later{i}")) for i in range(2)]
            live.wait_state(first, {"running"}, 60)
            filler = fill(state)

            for _ in range(3):
                r = live.http.post("/jobs", json=sleeper("refused"))
                assert r.status_code == 507, r.text
                assert r.headers["content-type"] == "application/json"
                detail = r.json()["detail"]
                assert f"the disk holding the state dir {state} is full" in detail
            r = live.http.delete(f"/jobs/{later[0]}")
            assert r.status_code == 507, r.text
            time.sleep(2)  # controller ticks meanwhile: none can record anything
            assert live.http.get("/health").status_code == 200
            listed = live.http.get("/jobs")
            assert listed.status_code == 200
            assert [j["id"] for j in listed.json()] == [first, *later]

            filler.unlink()
            again = live.submit(sleeper("after"))
            jobs = {j["id"]: j for j in live.http.get("/jobs").json()}
            assert list(jobs) == [first, *later, again]
            assert jobs[first]["state"] == "running"
            assert jobs[later[0]]["state"] == "queued"  # the refused cancel did not happen
            assert "Traceback" not in json.dumps(jobs)
        finally:
            live.stop()
            live.kill_workers()


def test_a_full_disk_under_jobs_leaves_a_job_queued_saying_why(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with tmpfs(state / "jobs", "1m") as jobs:
        live = serving(state, 2)
        try:
            first = live.submit(sleeper("first"))
            live.wait_state(first, {"running"}, 60)
            worker = worker_of(state, first)
            filler = fill(jobs)

            waiting = live.submit(sleeper("waiting"))  # the database has room: accepted
            wait_for(
                lambda: "is full" in (live.job(waiting).get("reason") or ""),
                15,
                "the job to say the disk is full",
            )
            job = live.job(waiting)
            assert job["state"] == "queued"
            assert f"the disk holding {state} is full" in job["reason"]
            time.sleep(2)  # a few more ticks, each trying again
            log = server_log(live)
            assert log.count(f"job {waiting}: the disk holding") == 1, log  # said once
            assert "controller tick failed" not in log and "Traceback" not in log, log
            assert live.job(first)["state"] == "running" and alive(*worker)
            assert live.http.get("/health").json()["ok"] is True

            filler.unlink()
            live.wait_state(waiting, {"running"}, 30)
            assert live.job(waiting)["reason_code"] != "disk_full"
            assert f"job {waiting}: the disk has room again" in server_log(live)
        finally:
            live.stop()
            live.kill_workers()


# -- slow, half-sent and idle requests ------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    # Deadlines shorter than the defaults (10 s, 20 s), so the suite waits less.
    live = LiveServer(
        tmp_path_factory.mktemp("slow-clients"),
        1,
        2.0,
        *("--header-timeout-s", str(HEADERS_TEST_S), "--body-timeout-s", str(BODY_TEST_S)),
    ).start()
    yield live
    live.stop()
    live.kill_workers()


HEADERS_TEST_S, BODY_TEST_S = 3.0, 5.0


def test_the_default_deadlines_close_a_half_sent_request_within_30_s() -> None:
    assert HEADERS_S < 30 and BODY_S + BACKSTOP_S < 30


def until_closed(sock: socket.socket, limit_s: float) -> tuple[float, bytes]:
    """Read until the server closes the connection; (seconds it took, what it sent)."""
    start = time.monotonic()
    got = b""
    sock.settimeout(1.0)
    while time.monotonic() - start < limit_s:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        except ConnectionResetError:
            break
        if not chunk:
            break
        got += chunk
    else:
        raise AssertionError(f"the connection is still open after {limit_s:.0f} s")
    return time.monotonic() - start, got


def test_half_sent_headers_are_closed_within_30_s(server: LiveServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # no blank line: unfinished
        took, said = until_closed(sock, 45)
    assert HEADERS_TEST_S - 0.5 <= took < HEADERS_TEST_S + 5, took  # at its deadline
    assert said.startswith(b"HTTP/1.1 408 "), said
    assert b"headers did not arrive" in said
    print(f"half-sent headers closed after {took:.2f} s")


def test_a_body_shorter_than_its_content_length_is_closed_within_30_s(
    server: LiveServer,
) -> None:
    head = (
        "POST /jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {server.token}\r\nContent-Length: 100\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(head.encode() + b'{"name": "half')
        took, said = until_closed(sock, 45)
    assert BODY_TEST_S - 0.5 <= took < BODY_TEST_S + 5, took
    status, _, body = said.partition(b"\r\n\r\n")
    assert status.startswith(b"HTTP/1.1 408 "), said
    assert "body did not arrive" in json.loads(body)["detail"]
    assert not [j for j in server.http.get("/jobs").json() if j["name"].startswith("half")]
    print(f"half-sent body closed after {took:.2f} s")


def test_200_idle_connections_do_not_stop_a_new_client(server: LiveServer) -> None:
    idle: list[socket.socket] = []
    try:
        for _ in range(200):
            idle.append(socket.create_connection(("127.0.0.1", server.port), timeout=5))
        start = time.monotonic()
        with httpx.Client(base_url=server.url, headers=server.headers, timeout=10) as fresh:
            assert fresh.get("/health").status_code == 200
            assert fresh.get("/jobs").status_code == 200
        took = time.monotonic() - start
        assert took < 2, took
        print(f"answered in {took * 1000:.0f} ms beside 200 idle connections")

        # And the idle ones do not stay for ever: each is closed at its deadline.
        open_ = set(idle)
        deadline = time.monotonic() + HEADERS_TEST_S + 10
        while open_ and time.monotonic() < deadline:
            ready, _, _ = select.select(list(open_), [], [], 1.0)
            for sock in ready:
                with suppress(OSError):
                    if sock.recv(1024):
                        continue
                open_.discard(sock)
        assert not open_, f"{len(open_)} idle connections still open"
    finally:
        for sock in idle:
            sock.close()


# -- the server's own orderly stop -------------------------------------------


def test_an_orderly_stop_leaves_no_process_of_any_job_and_the_next_server_resumes_them(
    tmp_path: Path,
) -> None:
    live = serving(tmp_path / "state", 2)
    try:
        job = live.submit(sleeper("stays", gpus=2))
        live.wait_state(job, {"running"}, 60)
        worker = worker_of(live.state_dir, job)
        live.stop()
        assert live.proc is not None and live.proc.returncode == 0, server_log(live)
        assert not alive(*worker), "a job's process outlived its server's orderly stop"
        assert "stopping 1 running jobs" in server_log(live)

        live = serving(live.state_dir, live.gpus)
        again = live.wait_state(job, {"running"}, 60)
        stopped = [e for e in again["events"] if e["kind"] == "stopped"]
        assert [e["reason"] for e in stopped] == ["server_stop"]
        assert again["attempts"] == 0  # our stop, not the job's failure
        assert worker_of(live.state_dir, job) != worker  # relaunched, not adopted
    finally:
        live.stop()
        live.kill_workers()


def test_leave_jobs_running_keeps_the_old_way_for_an_upgrade(tmp_path: Path) -> None:
    live = LiveServer(tmp_path / "state", 1, 2.0, "--leave-jobs-running").start()
    try:
        job = live.submit(sleeper("upgraded"))
        live.wait_state(job, {"running"}, 60)
        worker = worker_of(live.state_dir, job)
        live.stop()
        assert alive(*worker)
        live = serving(live.state_dir, live.gpus)
        assert live.job(job)["state"] == "running"
        assert worker_of(live.state_dir, job) == worker  # adopted
    finally:
        live.stop()
        live.kill_workers()


def test_a_rank_hung_at_exit_is_ended_and_show_warns_of_it(tmp_path: Path) -> None:
    live = LiveServer(tmp_path / "state", 2, 2.0, "--exit-grace-s", "2").start()
    hangs = "import os, threading\nif os.environ['RANK'] == '1':\n    threading.Event().wait()\n"
    try:
        job = live.submit({"name": "hangs", "command": ["python", "-c", hangs], "gpus": 2})
        live.wait_state(job, {"succeeded"}, 60)
        shown = run_cli(live.url, "show", job)
        assert shown.returncode == 0, shown.stderr
        assert "warning: rank 1 did not exit 2 s after the job's work was done" in " ".join(
            shown.stdout.split()
        )
    finally:
        live.stop()
        live.kill_workers()
