"""Processes of the lab's hosts: whether one lives, whether a holder has its own
network namespace, and killing whatever runs inside one."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterable
from pathlib import Path


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def kill_inside(holders: Iterable[int]) -> None:
    """SIGKILL every process in a holder's network namespace but the holder."""
    spaces = {}
    for pid in holders:
        with contextlib.suppress(OSError):
            spaces[os.readlink(f"/proc/{pid}/ns/net")] = pid
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            holder = spaces.get(os.readlink(entry / "ns" / "net"))
            if holder is not None and int(entry.name) != holder:
                os.kill(int(entry.name), signal.SIGKILL)


def in_own_net(pid: int) -> bool:
    try:
        return os.readlink(f"/proc/{pid}/ns/net") != os.readlink("/proc/self/ns/net")
    except OSError:
        return False
