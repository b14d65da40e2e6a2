"""A few idle warm wrappers (``ringleader.runtime.warm``), for launches that can use them.

Topping up waits until launches have been quiet for ``settle_s``: a new
wrapper spends a core-second importing torch, and spending it while a resized
gang is starting would slow the very start it is meant to speed up.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path

from ringleader.runtime.launch import run_dir, write_atomic
from ringleader.runtime.procs import start_ticks
from ringleader.runtime.warm import READY, WarmLaunch

DEFAULT_SETTLE_S = 2.0


class WarmPool:
    def __init__(self, size: int, settle_s: float = DEFAULT_SETTLE_S) -> None:
        if size < 0:
            raise ValueError(f"warm workers: need 0 or more, got {size}")
        self.size = size
        self.settle_s = settle_s
        self._idle: list[subprocess.Popen[bytes]] = []
        self._ready: set[int] = set()
        self._last_take = -float("inf")

    def top_up(self, *, now: bool = False) -> None:
        """Start wrappers until ``size`` are idle, unless a launch took one just now
        (``now``: regardless)."""
        self._idle = [p for p in self._idle if p.poll() is None]
        if not now and time.monotonic() - self._last_take < self.settle_s:
            return
        while len(self._idle) < self.size:
            self._idle.append(_spawn())

    def send(self, launch: WarmLaunch) -> bool:
        """Hand ``launch`` to an idle wrapper; False if none could take it (start it cold)."""
        while self._idle:
            proc = self._idle.pop(0)
            self._ready.discard(proc.pid)
            if proc.poll() is not None or proc.stdin is None:
                continue
            self._last_take = time.monotonic()
            try:
                proc.stdin.write(launch.to_line())
                proc.stdin.close()
            except OSError:
                continue
            if proc.stdout is not None:
                proc.stdout.close()
            _claim(proc.pid, launch)
            return True
        return False

    def wait_ready(self, timeout_s: float) -> bool:
        """Block until every idle wrapper has finished importing (benchmarks, tests)."""
        deadline = time.monotonic() + timeout_s
        waiting = {
            p.stdout: p for p in self._idle if p.stdout is not None and p.pid not in self._ready
        }
        while waiting:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            readable, _, _ = select.select(list(waiting), [], [], left)
            for pipe in readable:
                proc = waiting.pop(pipe)
                if pipe.readline() == READY:
                    self._ready.add(proc.pid)
        return True

    def close(self) -> None:
        """Let the idle wrappers go (they exit when their stdin closes)."""
        for proc in self._idle:
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    pipe.close()
        for proc in self._idle:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
        self._idle = []

    def pids(self) -> list[int]:
        return [p.pid for p in self._idle]


def _claim(pid: int, launch: WarmLaunch) -> None:
    """Write the rank's pid file now, as a cold wrapper would within milliseconds:
    the wrapper itself may still be importing, and a controller restarted
    meanwhile must see a live worker."""
    ticks = start_ticks(pid)
    if ticks is None:
        return  # already gone: the gang will show it as finished without an exit
    here = run_dir(Path(launch.job_dir), launch.generation)
    here.mkdir(parents=True, exist_ok=True)
    write_atomic(here / f"rank{launch.rank}.pid", f"{pid} {ticks}\n")


def _spawn() -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "ringleader.runtime.launch", "--warm"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd="/",
        start_new_session=True,
    )
