"""A network namespace of its own, reachable from this one by a veth pair.

For running a whole ``ringleader server`` — its jobs' parameter servers
included — on a loopback device nobody else uses, so its traffic ranks can be
applied (``--traffic-device lo``) and measured without touching this host's
own network. Tests and ``bench/traffic_runtime.py`` use it; addresses are in
10.252.0.0/16, which exists only between the pair.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from ringleader.net.tc import run


@dataclass(frozen=True, slots=True)
class Reachable:
    """A namespace (``name``) and the address of it a process here can connect to."""

    name: str
    address: str


@contextmanager
def reachable_namespace(tag: int | None = None) -> Iterator[Reachable]:
    """Create the namespace and its veth; remove both however the block ends."""
    tag = os.getpid() % 100_000 if tag is None else tag
    name, outside = f"rlsrv{tag}", f"rlh{tag}"
    subnet = f"10.252.{tag % 250}"
    run(["ip", "netns", "add", name])
    try:
        run(["ip", "link", "add", outside, "type", "veth", "peer", "name", "eth0", "netns", name])
        run(["ip", "addr", "add", f"{subnet}.1/30", "dev", outside])
        run(["ip", "link", "set", outside, "up"])
        run(["ip", "-n", name, "addr", "add", f"{subnet}.2/30", "dev", "eth0"])
        run(["ip", "-n", name, "link", "set", "eth0", "up"])
        run(["ip", "-n", name, "link", "set", "lo", "up"])
        yield Reachable(name, f"{subnet}.2")
    finally:
        subprocess.run(["ip", "link", "del", outside], capture_output=True)
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
