"""What a server takes before it starts: its state dir and its port, each refused clearly
when another holds it, before anything of the holder's is touched."""

from __future__ import annotations

import errno
import fcntl
import os
import socket
from pathlib import Path
from typing import IO

from ringleader.runtime.state import guard
from ringleader.runtime.state.errors import StoreError


class PortInUse(OSError):
    """The port (or address) the server would listen on cannot be had."""


def claim_state_dir(state_dir: Path) -> IO[str]:
    """Hold the state dir's lock for as long as the returned file stays open.

    Two servers on one state dir would both launch every queued job. The lock
    is an ``flock``, so the kernel drops it when the server dies, ``kill -9``
    included, and the next server starts at once.
    """
    guard.check_dir(state_dir)
    lock = open(state_dir / "server.lock", "a+")  # noqa: SIM115 - held until exit
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        holder = lock.read().strip() or "unknown"
        lock.close()
        raise StoreError(
            f"state dir {state_dir} is in use by another ringleader server (pid {holder}); "
            "stop it, or give this one its own --state-dir"
        ) from None
    lock.seek(0)
    lock.truncate()
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    return lock


def listen(host: str, port: int) -> socket.socket:
    """The server's listening socket, bound before anything else is done.

    A port that is taken is refused here, before the server has said it
    serves, started a controller or touched the CLI's record of the server
    that holds the port (which it would remove on its way out)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as err:
        raise PortInUse(f"--host {host}: {err.strerror}") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind(address)
        sock.listen(2048)
    except OSError as err:
        sock.close()
        if err.errno == errno.EADDRINUSE:
            raise PortInUse(
                f"port {port} on {host} is in use (another ringleader server?); "
                "stop what holds it, or give this one another --port"
            ) from None
        raise PortInUse(f"cannot listen on {host}:{port}: {err.strerror}") from None
    sock.set_inheritable(False)
    return sock
