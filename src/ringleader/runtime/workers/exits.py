"""Noticing a worker's exit when it happens, not at the controller's next look.

The controller looks at its jobs every half second. A GPU whose job ended
just after a look would idle until the next one, most of a short job's
handover. ``ExitWatch`` holds a pidfd (Linux ≥ 5.3) for each process it is
given, any process, not only our children, so also wrappers adopted after a
restart, and calls ``wake`` from its thread when one of them ends. It never
reaps anyone (``waitpid`` stays with whoever started the process) and knows
nothing of jobs: the controller, woken, looks at every job as it always does.
Where pidfds are missing it does nothing, and the half-second look remains.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import threading
from collections.abc import Callable

from ringleader.runtime.workers.procs import alive

log = logging.getLogger(__name__)


class ExitWatch:
    """Calls ``wake()`` soon after any watched process ends."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fds: dict[tuple[int, int], int] = {}
        """pidfd per watched (pid, start ticks)."""
        self._wake: Callable[[], None] | None = None
        self._thread: threading.Thread | None = None
        # epoll: an fd registered while the thread waits is waited on at once.
        self._poll = select.epoll() if hasattr(os, "pidfd_open") else None

    @property
    def available(self) -> bool:
        return self._poll is not None

    def on_exit(self, wake: Callable[[], None]) -> None:
        """Call ``wake`` (from another thread) whenever a watched process ends."""
        self._wake = wake
        if self._poll is not None and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="exit-watch", daemon=True)
            self._thread.start()

    def watch(self, pid: int, ticks: int) -> None:
        """Watch the process ``pid`` started at ``ticks`` (a no-op if already watched)."""
        if self._poll is None or self._wake is None:
            return
        key = (pid, ticks)
        with self._lock:
            if key in self._fds:
                return
            try:
                fd = os.pidfd_open(pid)
            except OSError:
                return  # gone already: the controller's look sees its exit
            if not alive(pid, ticks):  # the pid was reused before we held it
                os.close(fd)
                return
            self._fds[key] = fd
            self._poll.register(fd, select.EPOLLIN)

    def watching(self) -> int:
        with self._lock:
            return len(self._fds)

    def running(self, pid: int, ticks: int) -> bool:
        """Whether the process is watched and has not ended (False when unsure)."""
        with self._lock:
            return (pid, ticks) in self._fds

    def _run(self) -> None:
        assert self._poll is not None
        while True:
            try:
                ready = self._poll.poll()
            except InterruptedError:
                continue
            for fd, _ in ready:
                self._forget(fd)
            if ready and self._wake is not None:
                try:
                    self._wake()
                except Exception:  # the loop it wakes may be gone (shutting down)
                    log.debug("exit wake failed", exc_info=True)

    def _forget(self, fd: int) -> None:
        with self._lock:
            for key, held in list(self._fds.items()):
                if held == fd:
                    del self._fds[key]
            with contextlib.suppress(KeyError, ValueError):
                self._poll.unregister(fd)  # type: ignore[union-attr]
            os.close(fd)
