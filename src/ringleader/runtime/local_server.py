"""A ``ringleader server`` of our own on this machine, for commands that run real jobs.

``ringleader demo`` and ``ringleader fidelity`` each start one in a child
process on a free port, wait until it answers, and stop it however they end.
They act as its admin, with the token it writes to its state dir.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from ringleader.credentials import ADMIN_TOKEN_FILE, TOKEN_ENV
from ringleader.runtime.workers.executor.local import free_port


class LocalServerError(RuntimeError):
    """The server did not come up; the message says why and where its log is."""


@dataclass(frozen=True, slots=True)
class Served:
    """A running server's URL and its admin token."""

    url: str
    token: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    @property
    def env(self) -> dict[str, str]:
        """What a ``ringleader`` command needs to talk to this server as its admin."""
        return {"RINGLEADER_URL": self.url, TOKEN_ENV: self.token}

    def client(self, **kw: Any) -> httpx.Client:
        """An HTTP client for the API, as admin (``headers`` may be overridden)."""
        return httpx.Client(base_url=self.url, headers=self.headers, timeout=30, **kw)


def server_command(
    *,
    gpus: int | None,
    state_dir: Path,
    port: int,
    round_s: float,
    netns: str | None = None,
    host: str = "127.0.0.1",
    extra: Sequence[str] = (),
) -> list[str]:
    """The command line of a ``ringleader server`` on ``port``, in ``netns`` if given,
    serving on ``host`` (plain HTTP off the loopback: a namespace's own address)."""
    return [
        *(["ip", "netns", "exec", netns] if netns else []),
        sys.executable,
        "-m",
        "ringleader",
        "server",
        *(["--gpus", str(gpus)] if gpus is not None else []),
        "--state-dir",
        str(state_dir),
        "--port",
        str(port),
        "--round-s",
        f"{round_s:g}",
        *(["--host", host, "--insecure-http"] if host != "127.0.0.1" else []),
        *extra,
    ]


@contextmanager
def local_server(
    *,
    gpus: int,
    state_dir: Path,
    log: Path,
    round_s: float,
    policy: str | None = None,
    quantum_s: float | None = None,
    thresholds_gpu_s: tuple[float, ...] | None = None,
    netns: str | None = None,
    host: str = "127.0.0.1",
    extra: Sequence[str] = (),
    executor: str = "local",
) -> Iterator[Served]:
    """Run a server with ``gpus`` devices and state in ``state_dir``; yields where it is.

    ``netns``: in that network namespace, serving on ``host`` (an address of it
    this process reaches, over plain HTTP: ``ringleader.net.netns``); ``extra``:
    more ``ringleader server`` flags. ``executor``: ``slurm`` drives the Slurm cluster
    this host's commands reach, and ``gpus`` is then Slurm's to say.
    """
    port = free_port()
    url = f"http://{host}:{port}"
    # This user's own jobs on their own machine: they run as this user.
    flags = ["--no-isolate-jobs"]
    if policy is not None:
        flags += ["--policy", policy]
    if quantum_s is not None:
        flags += ["--quantum-s", f"{quantum_s:g}"]
    if thresholds_gpu_s is not None:
        flags += ["--tiresias-thresholds", ",".join(f"{x:g}" for x in thresholds_gpu_s)]
    if executor != "local":
        flags += ["--executor", executor]
    args = server_command(
        gpus=gpus if executor == "local" else None,
        state_dir=state_dir,
        port=port,
        round_s=round_s,
        netns=netns,
        host=host,
        extra=[*flags, *extra],
    )
    with open(log, "wb") as out:
        server = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        try:
            _wait_healthy(url, server, log)
            token = (state_dir / ADMIN_TOKEN_FILE).read_text().strip()
            yield Served(url, token)
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


def _wait_healthy(
    url: str, server: subprocess.Popen[bytes], log: Path, timeout: float = 30
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise LocalServerError(
                f"the server exited early with status {server.returncode}; see {log}"
            )
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise LocalServerError(f"the server did not answer at {url} within {timeout:.0f} s; see {log}")
