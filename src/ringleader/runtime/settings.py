"""What a server starts with, and the checks it makes before it claims anything.

``ringleader server`` turns its flags into a ``ServerConfig``; ``serve`` checks
the network and the jobs' isolation against it before it takes the state dir
or a port, so a server that refuses to start leaves nothing of its own behind
and nothing of a live one's touched (issue 59).
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from ringleader.runtime.control import lingering
from ringleader.runtime.http.timeouts import BODY_S, HEADERS_S
from ringleader.runtime.workers.bounded import LOG_CAP_BYTES, PROGRESS_CAP_BYTES
from ringleader.runtime.workers.gpus import GpuLayout
from ringleader.runtime.workers.identity import (
    can_switch,
    interpreter_paths,
    not_reachable,
    not_searchable,
)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
SYSTEM_STATE_DIR = Path("/var/lib/ringleader")
"""Root's state dir: its jobs' uids must reach their job directories, and root's home is
not theirs to enter."""


def default_state_dir() -> Path:
    """``$XDG_DATA_HOME/ringleader`` (``~/.local/share/ringleader``); for root,
    ``SYSTEM_STATE_DIR``, unless root's own already holds a server's database (moving
    it would leave its jobs behind)."""
    given = os.environ.get("XDG_DATA_HOME")
    own = Path(given or str(Path.home() / ".local" / "share")) / "ringleader"
    if os.geteuid() == 0 and not given and not (own / "ringleader.db").exists():
        return SYSTEM_STATE_DIR
    return own


@dataclass(frozen=True, slots=True)
class ServerConfig:
    state_dir: Path
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    gpus: int | GpuLayout | None = None
    """A count or a type mix of devices (``workers.gpus``); None: the machine's GPUs, or 1."""
    policy: str = "elastic"
    probe_window_s: float | None = None
    round_s: float = 30.0
    tick_s: float = 0.5
    quantum_s: float | None = None
    thresholds_gpu_s: tuple[float, ...] | None = None
    """Least-attained-service queue thresholds (tiresias, ringleader); None: the policy's."""
    executor: str = "local"
    address: str = "auto"
    slurm_partition: str | None = None
    """``--executor slurm``: the partition (None: Slurm's default)."""
    slurm_url: str | None = None
    """``--executor slurm``: slurmrestd's address (None: Slurm's own commands)."""
    warm_start: bool = True
    log_cap_bytes: int = LOG_CAP_BYTES
    progress_cap_bytes: int = PROGRESS_CAP_BYTES
    tls_cert: Path | None = None
    tls_key: Path | None = None
    insecure_http: bool = False
    """Serve plain HTTP on a non-loopback address: tokens cross the network readable."""
    allow_hosts: tuple[str, ...] = ()
    """More names clients may reach the server by (the ``Host`` check)."""
    header_timeout_s: float = HEADERS_S
    """A request's headers must arrive within this, or the connection is closed."""
    body_timeout_s: float = BODY_S
    """A request's body must arrive within this after its headers (408 otherwise)."""
    isolate_jobs: bool = True
    """As root, run each user's jobs as their own uid (``ringleader.runtime.workers.identity``)."""
    exit_grace_s: float = lingering.GRACE_S
    """How long a rank may stay, idle, once its job's work is done (``control.lingering``)."""
    leave_jobs_running: bool = False
    """At an orderly stop, leave running jobs for the next server to adopt, not stop them."""
    traffic_device: str | None = None
    """The NIC whose egress the plan's traffic ranks shape (None: no ranks applied)."""
    traffic_mbit: float | None = None
    """Its rate in Mbit/s (None: the device's own speed, from sysfs)."""

    @property
    def scheme(self) -> str:
        return "https" if self.tls_cert is not None else "http"

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


class ConfigError(ValueError):
    """Settings the server will not start with; the message says which and what to do."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_network(config: ServerConfig) -> str | None:
    """Refuse plain HTTP off this machine unless asked for; returns a warning to print."""
    if (config.tls_cert is None) != (config.tls_key is None):
        raise ConfigError("--tls-cert and --tls-key go together: give both, or neither")
    for path in (config.tls_cert, config.tls_key):
        if path is not None and not path.is_file():
            raise ConfigError(f"{path}: no such file (--tls-cert/--tls-key)")
    if is_loopback(config.host) or config.tls_cert is not None:
        return None
    if not config.insecure_http:
        raise ConfigError(
            f"--host {config.host} serves beyond this machine, where tokens would cross the "
            "network unencrypted: give --tls-cert and --tls-key, or --insecure-http on a "
            "network you trust"
        )
    return (
        f"WARNING: serving plain HTTP on {config.host}: anyone on the network path can read "
        "tokens and job data (--insecure-http); use --tls-cert/--tls-key"
    )


def check_isolation(config: ServerConfig) -> None:
    """Refuse to start isolating jobs whose users could not even run Python here."""
    if not (config.isolate_jobs and can_switch()):
        return
    if (why := not_reachable(interpreter_paths())) is not None:
        raise ConfigError(
            f"jobs run as their users' own uids, but {why}, so no job could start: install "
            "ringleader from a Python every user can run (a venv from /usr/bin/python3: "
            "`rm -rf .venv && make demo PYTHON=/usr/bin/python3`), or, on a machine with one "
            "user, give --no-isolate-jobs"
        )
    if (why := not_searchable(config.state_dir)) is not None:
        raise ConfigError(
            f"jobs run as their users' own uids in job directories under the state dir "
            f"{config.state_dir}, but {why}, so no job could write its logs: give --state-dir "
            f"a directory every user can enter (e.g. {SYSTEM_STATE_DIR}), or, on a machine with "
            "one user, give --no-isolate-jobs"
        )
