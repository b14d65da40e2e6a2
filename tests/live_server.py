"""A real ``ringleader server`` in a subprocess, for tests that need the whole runtime."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from ringleader.runtime.local_server import server_command
from ringleader.runtime.workers.executor.local import free_port
from ringleader.runtime.workers.identity import interpreter_paths, not_reachable

TINY_RESNET = (
    "python -m ringleader.workloads.resnet --depth 8 --image-size 8 --batch 16 "
    "--examples-per-epoch 256 --epochs {epochs} --checkpoint-every-s {ckpt}"
)


_HANDED_OUT: set[int] = set()


def server_port() -> int:
    """A free port below the kernel's ephemeral range (32768 and up here), not handed out
    before in this process. A port from that range can be taken, between its choice and
    the server's bind, by one of the test's own client connections (a dozen servers
    polled at once open many), and the server would then refuse to start."""
    rng = random.Random()
    for _ in range(200):
        port = rng.randint(20_000, 32_000)
        if port in _HANDED_OUT:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        return port
    return free_port()


def tiny_job(name: str, epochs: float = 2, ckpt: float = 1.0, **fields: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": name,
        "command": TINY_RESNET.format(epochs=epochs, ckpt=ckpt),
        "epochs": epochs,
    }
    spec.update(fields)
    return spec


def run_cli(
    url: str, *args: str, cwd: Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``ringleader ARGS`` against the server at ``url``, as a user's shell would run it."""
    env = {**os.environ, "RINGLEADER_URL": url, "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "ringleader", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
    )


def server_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``ringleader server ARGS`` (jobs as this user), for tests of what it refuses to
    start with: it is expected to exit, so it gets no port of its own."""
    return subprocess.run(
        [sys.executable, "-m", "ringleader", "server", "--no-isolate-jobs", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


@contextmanager
def others_can_run_python() -> Iterator[list[Path]]:
    """Let other uids run this Python, for servers that run jobs as users' own uids.

    Some machines keep Python under a 0700 ``/root``. Each directory on the way
    that others cannot search gets o+x (search, not list) while the block
    runs, and its mode back after; yields what was changed.
    """
    changed: list[tuple[Path, int]] = []
    for _ in range(10):
        why = not_reachable(interpreter_paths())
        if why is None:
            break
        blocked = Path(why.split(" ", 1)[0])
        mode = stat.S_IMODE(blocked.stat().st_mode)
        changed.append((blocked, mode))
        blocked.chmod(mode | stat.S_IXOTH | (stat.S_IROTH if blocked.is_file() else 0))
    try:
        yield [path for path, _ in changed]
    finally:
        for path, mode in reversed(changed):
            path.chmod(mode)


def rank0_worker_pid(state_dir: Path, job_id: str, generation: int) -> int:
    """The pid of rank 0's worker (the child of its launch wrapper) in a generation."""
    wrapper = int(
        (state_dir / "jobs" / job_id / "run" / f"gen{generation:06d}" / "rank0.pid")
        .read_text()
        .split()[0]
    )
    children = Path(f"/proc/{wrapper}/task/{wrapper}/children").read_text().split()
    return int(children[0])


def serving(state_dir: Path, gpus: int = 4) -> Iterator[LiveServer]:
    """A started server for a fixture to yield; stopped, its workers killed, afterwards."""
    live = LiveServer(state_dir, gpus).start()
    yield live
    live.stop()
    live.kill_workers()


def wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


class LiveServer:
    def __init__(
        self,
        state_dir: Path,
        gpus: int = 4,
        round_s: float = 2.0,
        *extra: str,
        isolated: bool = False,
        netns: str | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        """``isolated``: run jobs as their users' uids (the default of a root server). Off
        here, as on a one-user machine: pytest's temporary directories are 0700 root's,
        so no other uid could run a job whose workdir is one of them.

        ``netns``: run the server (and so its jobs) in that network namespace,
        serving on ``host``, an address of it the test can reach."""
        self.state_dir = state_dir
        self.gpus = gpus
        self.round_s = round_s
        self.extra = extra if isolated else (*extra, "--no-isolate-jobs")
        self.netns, self.host = netns, host
        self.port = server_port()
        self.url = f"http://{host}:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.token = ""
        self.http = httpx.Client(timeout=10)
        """The API as the server's admin (its address and token are set by ``start``)."""

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def start(self) -> LiveServer:
        """Launch the server and wait until it answers."""
        return self.launch().ready()

    def launch(self) -> LiveServer:
        """Start the server's process without waiting for it (``ready`` does), so a test
        can start several at once."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.http.base_url = httpx.URL(self.url)  # a test may have moved the port
        log = open(self.state_dir / "server.log", "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(
            server_command(
                gpus=self.gpus,
                state_dir=self.state_dir,
                port=self.port,
                round_s=self.round_s,
                netns=self.netns,
                host=self.host,
                extra=self.extra,
            ),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        return self

    def ready(self) -> LiveServer:
        """Wait until the launched server answers; take its admin token."""
        wait_for(self._healthy, 30, "the server to answer /health")
        self.token = (self.state_dir / "admin.token").read_text().strip()
        self.http.headers.update(self.headers)
        return self

    def _healthy(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"server exited: {(self.state_dir / 'server.log').read_text()}")
        try:
            return self.http.get("/health", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        self.terminate()
        if self.proc is not None:
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def terminate(self) -> None:
        """Ask the server to stop (SIGTERM) without waiting; ``stop`` waits."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def user(self, name: str, *flags: str) -> httpx.Client:
        """A user made with ``ringleader users add``, as a client holding their token."""
        out = run_cli(self.url, "users", "add", name, *flags)
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert len(lines) == 1 and lines[0].startswith("rl_"), out.stdout  # the token alone
        auth = {"Authorization": f"Bearer {lines[0]}"}
        return httpx.Client(base_url=self.url, headers=auth, timeout=10)

    def kill_workers(self) -> None:
        """Leave no training process behind, whatever the test did."""
        for pid_file in self.state_dir.glob("jobs/*/run/*/rank*.pid"):
            try:
                pid = int(pid_file.read_text().split()[0])
                os.killpg(pid, signal.SIGKILL)
            except (OSError, ValueError):
                pass

    # -- API helpers --------------------------------------------------------
    def submit(self, spec: dict[str, Any]) -> str:
        r = self.http.post("/jobs", json=spec, timeout=10)
        assert r.status_code == 201, r.text
        job_id: str = r.json()["id"]
        return job_id

    def job(self, job_id: str) -> dict[str, Any]:
        r = self.http.get(f"/jobs/{job_id}", timeout=10)
        r.raise_for_status()
        data: dict[str, Any] = r.json()
        return data

    def wait_state(self, job_id: str, states: set[str], timeout: float = 120) -> dict[str, Any]:
        try:
            wait_for(lambda: self.job(job_id)["state"] in states, timeout, f"{job_id} in {states}")
        except AssertionError as err:
            raise AssertionError(f"{err}\n{self.why(job_id)}") from None
        return self.job(job_id)

    def why(self, job_id: str) -> str:
        """What a test that timed out waiting on a job prints: the job's state, its
        history and the server log's last lines."""
        try:
            job = json.dumps(self.job(job_id))
        except httpx.HTTPError as err:  # the server died: the log says why
            job = f"(the server did not answer: {err})"
        log = (self.state_dir / "server.log").read_text(errors="replace").splitlines()
        return "\n".join([f"job: {job[:3000]}", "server log:", *log[-40:]])

    def progress(self, job_id: str) -> list[dict[str, Any]]:
        r = self.http.get(f"/jobs/{job_id}/progress", timeout=10)
        r.raise_for_status()
        data: list[dict[str, Any]] = r.json()
        return data

    def cluster(self) -> dict[str, Any]:
        r = self.http.get("/cluster", timeout=10)
        r.raise_for_status()
        data: dict[str, Any] = r.json()
        return data

    def cancel(self, job_id: str) -> None:
        self.http.delete(f"/jobs/{job_id}", timeout=10).raise_for_status()
