"""Who may do what: tokens, owners, admins, browser-borne requests, secrets (issue 14).

Against a real server, as its admin and as two ordinary users made through
the CLI. Every endpoint the server documents is tried without a token.
"""

from __future__ import annotations

import os
import sqlite3
import ssl
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.live_server import LiveServer, run_cli, wait_for

pytestmark = pytest.mark.slow

SECRET = "server-secret-do-not-leak"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    # The server's own environment holds a secret no job may see.
    os.environ["RINGLEADER_TEST_SERVER_SECRET"] = SECRET
    try:
        live = LiveServer(tmp_path_factory.mktemp("access"), 2).start()
    finally:
        del os.environ["RINGLEADER_TEST_SERVER_SECRET"]
    yield live
    live.stop()
    live.kill_workers()


@pytest.fixture(scope="module")
def alice(server: LiveServer) -> httpx.Client:
    return server.user("alice", "--quota-gpus", "2")


@pytest.fixture(scope="module")
def bob(server: LiveServer) -> httpx.Client:
    return server.user("bob")


def _documented(server: LiveServer) -> list[tuple[str, str]]:
    schema = server.http.get("/openapi.json").json()
    return [(m.upper(), p) for p, ops in schema["paths"].items() for m in ops]


def test_every_endpoint_but_health_wants_a_valid_token(server: LiveServer) -> None:
    routes = _documented(server)
    assert len(routes) >= 10, routes
    for token in (None, "rl_not-a-token", "x" * 5000):
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        for method, path in routes:
            url = server.url + path.replace("{job_id}", "some-job").replace("{name}", "alice")
            r = httpx.request(method, url, headers=headers, json={}, timeout=10)
            want = 200 if path == "/health" else 401
            assert r.status_code == want, (method, path, token and token[:20], r.text[:200])
            if want == 401:
                assert r.headers["www-authenticate"] == "Bearer"
    assert httpx.get(server.url + "/openapi.json", timeout=10).status_code == 401


def test_tokens_are_stored_hashed_and_the_admin_token_is_private(
    server: LiveServer, alice: httpx.Client
) -> None:
    token = alice.headers["authorization"].split()[1]
    db = server.state_dir / "ringleader.db"
    with sqlite3.connect(db) as conn:
        stored = [r[0] for r in conn.execute("SELECT token_hash FROM users")]
    assert stored and token not in stored and all(len(h) == 64 for h in stored)
    for path in (db, server.state_dir / "admin.token"):
        assert token.encode() not in path.read_bytes()
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert stat.S_IMODE(server.state_dir.stat().st_mode) == 0o711


def test_a_user_sees_and_changes_only_their_own_jobs(
    server: LiveServer, alice: httpx.Client, bob: httpx.Client
) -> None:
    r = alice.post("/jobs", json={"name": "alices", "command": ["sleep", "60"]})
    assert r.status_code == 201, r.text
    job = r.json()
    assert job["user"] == "alice"
    mine = job["id"]
    for method, path in (
        ("GET", f"/jobs/{mine}"),
        ("GET", f"/jobs/{mine[:8]}"),  # a prefix finds nothing of another user's
        ("DELETE", f"/jobs/{mine}"),
        ("GET", f"/jobs/{mine}/logs"),
        ("GET", f"/jobs/{mine}/progress"),
    ):
        r = bob.request(method, path)
        assert r.status_code == 404, (method, path, r.text)
    r = bob.patch(f"/jobs/{mine}", json={"priority": -1})
    assert r.status_code == 404
    assert mine not in {j["id"] for j in bob.get("/jobs").json()}
    assert bob.get("/jobs", params={"user": "alice"}).json() == []
    # Nothing bob tried changed it; alice and the admin see it.
    assert alice.get(f"/jobs/{mine}").json()["state"] in ("queued", "running")
    assert server.job(mine)["spec"]["priority"] == 0
    assert mine in {j["id"] for j in server.http.get("/jobs").json()}
    assert alice.delete(f"/jobs/{mine}").status_code == 200


def test_a_jobs_user_comes_from_the_token_never_the_spec(alice: httpx.Client) -> None:
    r = alice.post("/jobs", json={"name": "forged", "command": ["true"], "user": "bob"})
    assert r.status_code == 422 and r.json()["detail"][0]["field"] == "user"
    r = alice.post("/jobs", json={"name": "own", "command": ["true"], "user": "alice"})
    assert r.status_code == 201 and r.json()["user"] == "alice"


def test_only_admins_manage_users(server: LiveServer, alice: httpx.Client) -> None:
    assert alice.post("/users", json={"name": "mallory", "admin": True}).status_code == 403
    assert alice.get("/users").status_code == 403
    assert alice.delete("/users/bob").status_code == 403
    assert alice.post("/users/bob/token").status_code == 404  # not hers to rotate
    names = {u["name"] for u in server.http.get("/users").json()}
    assert "mallory" not in names and {"admin", "alice"} <= names
    r = server.http.post("/users", json={"name": "Not A Unix Name"})
    assert r.status_code == 422 and r.json()["detail"][0]["field"] == "name"
    r = server.http.post("/users", json={"name": "alice"})
    assert r.status_code == 422 and "exists" in r.json()["detail"][0]["reason"]


def test_a_rotated_token_stops_working_at_once(server: LiveServer) -> None:
    carol = server.user("carol")
    assert carol.get("/whoami").json()["name"] == "carol"
    new = carol.post("/users/carol/token").json()["token"]
    assert carol.get("/whoami").status_code == 401
    fresh = {"Authorization": f"Bearer {new}"}
    assert httpx.get(server.url + "/whoami", headers=fresh).json()["name"] == "carol"
    assert server.http.delete("/users/carol").status_code == 200
    assert httpx.get(server.url + "/whoami", headers=fresh).status_code == 401


def test_priority_is_bounded_by_the_users_priority_max(
    server: LiveServer, alice: httpx.Client
) -> None:
    r = alice.post("/jobs", json={"name": "pushy", "command": ["true"], "priority": 5})
    assert r.status_code == 422 and r.json()["detail"][0]["field"] == "priority"
    assert "priority-max" in r.json()["detail"][0]["reason"]
    job = alice.post("/jobs", json={"name": "meek", "command": ["sleep", "30"]}).json()["id"]
    assert alice.patch(f"/jobs/{job}", json={"priority": 3}).status_code == 422
    assert alice.patch(f"/jobs/{job}", json={"priority": -3}).status_code == 200
    assert server.http.patch(f"/jobs/{job}", json={"priority": 900}).status_code == 200
    server.cancel(job)


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Host": "evil.example"}, 421),  # DNS rebinding: a page's own name pointed here
        ({"Host": "evil.example:80"}, 421),
        ({"Host": ""}, 421),
        ({"Origin": "http://evil.example"}, 403),  # a cross-site form or fetch
        ({"Origin": "null"}, 403),
    ],
)
def test_browser_borne_requests_are_refused_and_nothing_is_stored(
    server: LiveServer, headers: dict[str, str], status: int
) -> None:
    before = len(server.http.get("/jobs").json())
    r = server.http.post("/jobs", json={"name": "csrf", "command": ["id"]}, headers=headers)
    assert r.status_code == status, r.text
    assert r.json()["detail"][0]["field"] in ("(host)", "(origin)")
    assert len(server.http.get("/jobs").json()) == before
    # A text/plain body, the one a page may POST without asking: refused too.
    plain = {"Content-Type": "text/plain"}
    r = server.http.post("/jobs", content=b'{"name": "csrf", "command": ["id"]}', headers=plain)
    assert r.status_code == 415
    assert len(server.http.get("/jobs").json()) == before


def test_names_the_server_is_known_by_and_its_own_origin_pass(server: LiveServer) -> None:
    for host in (f"localhost:{server.port}", f"127.0.0.1:{server.port}", "[::1]"):
        assert server.http.get("/cluster", headers={"Host": host}).status_code == 200
    own = {"Origin": server.url}
    r = server.http.post("/jobs", json={"name": "same-origin", "command": ["true"]}, headers=own)
    assert r.status_code == 201


def test_env_values_are_write_only_and_jobs_get_a_clean_environment(
    server: LiveServer, alice: httpx.Client
) -> None:
    spec: dict[str, Any] = {
        "name": "envjob",
        "command": ["sh", "-c", "env"],
        "env": {"API_KEY": "hunter2"},
    }
    job = alice.post("/jobs", json=spec).json()
    assert job["spec"]["env"] == {"API_KEY": None}
    server.wait_state(job["id"], {"succeeded"})
    shown = alice.get(f"/jobs/{job['id']}").json()
    assert shown["spec"]["env"] == {"API_KEY": None}
    assert "hunter2" not in alice.get(f"/jobs/{job['id']}").text
    log = alice.get(f"/jobs/{job['id']}/logs").text
    assert "API_KEY=hunter2" in log  # the job itself has it
    assert SECRET not in log and "RINGLEADER_TEST_SERVER_SECRET" not in log
    names = {line.split("=", 1)[0] for line in log.splitlines() if "=" in line}
    assert {"PATH", "HOME", "LANG", "RANK", "RINGLEADER_JOB_ID"} <= names


def test_the_cli_finds_its_own_servers_token_and_login_saves_another(
    server: LiveServer, tmp_path: Path
) -> None:
    out = run_cli(server.url, "whoami")
    assert out.returncode == 0 and "admin (admin)" in out.stdout, out.stderr
    token = run_cli(server.url, "users", "add", "dave").stdout.strip()
    env = {**os.environ, "RINGLEADER_URL": server.url, "XDG_CONFIG_HOME": str(tmp_path)}
    login = subprocess.run(
        [sys.executable, "-m", "ringleader", "login", "--token-stdin"],
        input=token + "\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert login.returncode == 0, login.stderr
    saved = tmp_path / "ringleader" / "tokens.json"
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    who = subprocess.run(
        [sys.executable, "-m", "ringleader", "whoami"], capture_output=True, text=True, env=env
    )
    assert "dave (user)" in who.stdout, who.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "ringleader", "jobs"],
        capture_output=True,
        text=True,
        env={**env, "RINGLEADER_TOKEN": "rl_wrong"},
    )
    assert bad.returncode == 1 and "refused the token from RINGLEADER_TOKEN" in bad.stderr
    assert "Traceback" not in bad.stderr


def _server(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ringleader", "server", "--gpus", "1", "--no-isolate-jobs", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
    )


def test_serving_beyond_loopback_needs_tls_or_an_explicit_insecure_flag(tmp_path: Path) -> None:
    out = _server("--host", "0.0.0.0", "--state-dir", str(tmp_path / "s"), cwd=tmp_path)
    assert out.returncode == 2
    assert "--tls-cert" in out.stderr and "--insecure-http" in out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "s" / "ringleader.db").exists()  # refused before anything
    half = _server("--tls-cert", str(tmp_path / "c.pem"), "--state-dir", "s", cwd=tmp_path)
    assert half.returncode == 2 and "go together" in half.stderr


def test_insecure_http_beyond_loopback_starts_with_a_warning(tmp_path: Path) -> None:
    # In a network namespace of its own, with loopback only: 0.0.0.0 reaches nowhere else.
    if subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode != 0:
        pytest.skip("cannot make a network namespace here (needs root)")
    script = (
        "ip link set lo up; "
        f"timeout 20 {sys.executable} -m ringleader server --gpus 1 --host 0.0.0.0 "
        "--no-isolate-jobs "
        f"--port 8766 --insecure-http --state-dir {tmp_path / 's'} & "
        "for i in $(seq 100); do "
        f"  {sys.executable} -c \"import httpx; httpx.get('http://127.0.0.1:8766/health')\" "
        "  2>/dev/null && break; sleep 0.2; done; "
        "kill %1; wait"
    )
    out = subprocess.run(
        ["unshare", "-n", "sh", "-c", script], capture_output=True, text=True, timeout=60
    )
    assert "WARNING: serving plain HTTP on 0.0.0.0" in out.stderr, out.stderr[-2000:]
    assert (tmp_path / "s" / "admin.token").exists()


def test_tls_serves_https_only(tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    names = "subjectAltName=DNS:localhost,IP:127.0.0.1"
    made = subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-subj", "/CN=localhost", "-addext", names, "-keyout", str(key), "-out", str(cert)),
        ],
        capture_output=True,
    )
    if made.returncode != 0:
        pytest.skip(f"openssl cannot make a certificate here: {made.stderr[-200:]!r}")
    live = LiveServer(tmp_path / "s", 1, 2.0, "--tls-cert", str(cert), "--tls-key", str(key))
    live.url = live.url.replace("http://", "https://")
    trust = ssl.create_default_context(cafile=str(cert))
    live.http = httpx.Client(base_url=live.url, verify=trust, timeout=10)
    try:
        live.start()
        assert live.http.get("/whoami").json()["name"] == "admin"
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{live.port}/health", timeout=2)
    finally:
        live.stop()
    wait_for(lambda: live.proc is not None and live.proc.poll() is not None, 20, "the stop")


def test_a_stopped_server_removes_its_record_for_the_cli(tmp_path: Path) -> None:
    live = LiveServer(tmp_path / "s", 1).start()
    record = Path(os.environ["XDG_CONFIG_HOME"]) / "ringleader" / "servers" / f"{live.port}.json"
    assert record.exists() and stat.S_IMODE(record.stat().st_mode) == 0o600
    live.stop()  # SIGTERM, as a service manager stops it
    assert live.proc is not None and live.proc.returncode == 0
    assert not record.exists()


def test_an_admin_that_rotates_its_own_token_keeps_the_cli_on_this_host_working(
    server: LiveServer,
) -> None:
    new = server.http.post("/users/admin/token").json()["token"]
    try:
        assert (server.state_dir / "admin.token").read_text().strip() == new
        out = run_cli(server.url, "whoami")  # finds the server's token file, as before
        assert out.returncode == 0 and "admin (admin)" in out.stdout, out.stderr
    finally:  # the rest of this module's requests carry the admin's token
        server.token = new
        server.http.headers.update(server.headers)
