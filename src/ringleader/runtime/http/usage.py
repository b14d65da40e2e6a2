"""Who held how many GPUs, over the last hour: the dashboard's cluster picture.

The events table could rebuild any moment of the past, but answering "who
holds what, lately" from it means replaying every job's history at each
page refresh. A server instead samples its unfinished jobs every
``SAMPLE_S`` into a bounded ring: cheap to keep, cheap to serve, and lost on
a restart (the job pages keep the durable history).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ringleader.runtime.state.rows import JobRow, State
from ringleader.runtime.state.store import Store

log = logging.getLogger(__name__)

SAMPLE_S = 2.0
KEPT = 1800
"""Samples kept: an hour at ``SAMPLE_S``."""


@dataclass(frozen=True, slots=True)
class Sample:
    t: float
    running: dict[str, int]
    """GPUs held by each user's running jobs."""
    suspended: int
    """GPUs held by time-sliced-out jobs (kept, but idle)."""
    queued: int
    """Jobs waiting for GPUs."""

    def public(self) -> dict[str, Any]:
        return {
            "t": self.t,
            "running": self.running,
            "suspended": self.suspended,
            "queued": self.queued,
        }


def sample(rows: Iterable[JobRow], t: float) -> Sample:
    """What ``rows`` (the unfinished jobs) hold at time ``t``."""
    running: dict[str, int] = {}
    suspended = queued = 0
    for row in rows:
        if row.state is State.RUNNING and row.workers:
            user = row.spec.user or "?"
            running[user] = running.get(user, 0) + row.workers
        elif row.state is State.SUSPENDED:
            suspended += len(row.devices)
        elif row.state is State.QUEUED:
            queued += 1
    return Sample(t, dict(sorted(running.items())), suspended, queued)


class UsageHistory:
    """The last ``KEPT`` samples, oldest first (thread-safe)."""

    def __init__(self, kept: int = KEPT) -> None:
        self._lock = threading.Lock()
        self._samples: deque[Sample] = deque(maxlen=kept)

    def add(self, s: Sample) -> None:
        with self._lock:
            self._samples.append(s)

    def since(self, t: float) -> list[Sample]:
        """Samples taken after ``t`` (all of them for 0)."""
        with self._lock:
            return [s for s in self._samples if s.t > t]


async def keep_sampling(
    history: UsageHistory, store: Store, clock: Callable[[], float] = time.time
) -> None:
    """Sample ``store`` into ``history`` until cancelled (the server's lifetime)."""
    while True:
        try:
            rows = await asyncio.to_thread(store.unfinished)
        except Exception:  # a full disk or a lost database: the server says so elsewhere
            log.exception("cannot sample GPU usage")
        else:
            history.add(sample(rows, clock()))
        await asyncio.sleep(SAMPLE_S)
