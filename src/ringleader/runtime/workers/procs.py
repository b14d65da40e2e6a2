"""Process identity that survives a controller restart: pid plus kernel start time.

A bare pid can be reused by an unrelated process after the original exits; the
pair (pid, start time in clock ticks since boot) cannot. Linux only.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path


def stat_fields(stat: str) -> list[str]:
    """The fields of a ``/proc/PID/stat`` line after the command name (which may hold
    spaces and parentheses): ``[0]`` is the state, ``[2]`` the process group, ``[19]``
    the start time."""
    return stat[stat.rfind(")") + 2 :].split()


def start_ticks(pid: int) -> int | None:
    """The process' start time from /proc, or None if no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat_fields(stat)
    state = fields[0]
    if state in ("Z", "X"):
        return None
    return int(fields[19])


def alive(pid: int, ticks: int) -> bool:
    return start_ticks(pid) == ticks


def kill_group(pid: int, ticks: int, sig: int = signal.SIGKILL) -> None:
    """Signal the process group led by ``pid``.

    Also when the leader itself is gone: its worker may still run in the group.
    A reused pid would lead a group only if it called setsid, which a fresh
    process rarely does; we accept that risk to leave no orphan training.
    """
    del ticks  # identity matters for liveness, not for reaching the group
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def signal_process(pid: int, ticks: int, sig: int) -> bool:
    """Signal ``pid`` if it is still the process started at ``ticks``; whether it was sent."""
    if not alive(pid, ticks):
        return False
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def tree_cpu_s(pid: int, ticks: int) -> float | None:
    """CPU seconds used so far by ``pid`` (if it is still the one started at ``ticks``)
    and every live descendant: how a rank that is working tells from one that hangs."""
    if not alive(pid, ticks):
        return None
    hz = os.sysconf("SC_CLK_TCK")
    total, todo, seen = 0, [pid], set()
    while todo:
        here = todo.pop()
        if here in seen:
            continue
        seen.add(here)
        try:
            fields = stat_fields(Path(f"/proc/{here}/stat").read_text())
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
        for task in Path(f"/proc/{here}/task").glob("*/children"):
            with contextlib.suppress(OSError, ValueError):
                todo += [int(p) for p in task.read_text().split()]
    return total / hz
