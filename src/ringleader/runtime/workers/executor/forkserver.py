"""The local executor's side of warm starts: a fork server (``runtime.workers.warm``).

A launch goes to the server only once it has finished importing; before
that (the first seconds after start) or if it died, workers start cold and a
new server is started (at most every ``RESPAWN_S``), so a warm start is never
slower than a cold one and never delays a pid file. A worker whose
environment sets what the interpreter or torch's libraries read at start-up
(``warm.startup_env``) differently from the server's starts cold too.
"""

from __future__ import annotations

import contextlib
import select
import subprocess
import sys
import time
from collections.abc import Mapping

from ringleader.runtime.workers.warm import READY, WarmLaunch, clean_env, startup_env

RESPAWN_S = 30.0


class Forkserver:
    def __init__(self, enabled: bool = True, *, bare: bool = False) -> None:
        """``bare``: a server that imports nothing first, for workers that ``exec``
        another program (ready at once, and cheap to fork)."""
        self.enabled = enabled
        self.bare = bare
        self._proc: subprocess.Popen[bytes] | None = None
        self._ready = False
        self._started = -float("inf")
        self._env = _server_env()
        self.start()

    def start(self) -> None:
        """Start the server if it is enabled and not running (cheap to call often)."""
        if not self.enabled or (self._proc is not None and self._proc.poll() is None):
            return
        if time.monotonic() - self._started < RESPAWN_S:
            return  # it died young: don't spend a core re-importing torch every tick
        self._drop()
        self._started = time.monotonic()
        self._proc = _spawn(self._env, self.bare)
        self._ready = False

    def compatible(self, env: Mapping[str, str]) -> bool:
        """Whether a worker with ``env`` would start the same forked as cold."""
        return startup_env(env) == startup_env(self._env)

    def ready(self, timeout_s: float = 0.0) -> bool:
        """Whether the server has finished importing (waiting up to ``timeout_s``)."""
        self.start()
        proc = self._proc
        if self._ready or proc is None or proc.stdout is None:
            return self._ready
        deadline = time.monotonic() + timeout_s
        while True:
            left = max(0.0, deadline - time.monotonic())
            readable, _, _ = select.select([proc.stdout], [], [], left)
            if readable:
                self._ready = proc.stdout.readline() == READY
                return self._ready
            if left <= 0:
                return False

    def send(self, launch: WarmLaunch) -> bool:
        """Have the server fork ``launch``'s wrapper; False: start it cold instead."""
        if not self.ready() or self._proc is None or self._proc.stdin is None:
            return False
        try:
            self._proc.stdin.write(launch.to_line())
            self._proc.stdin.flush()
        except OSError:
            self._drop()
            return False
        return True

    def close(self) -> None:
        self._drop()

    def _drop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid


def _server_env() -> dict[str, str]:
    return {
        **clean_env(),
        "PYTHONUNBUFFERED": "1",
    }


def _spawn(env: Mapping[str, str], bare: bool) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "ringleader.runtime.workers.launch", "--warm", *(["--bare"] * bare)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd="/",
        start_new_session=True,
    )
