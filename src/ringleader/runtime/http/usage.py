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


@dataclass(frozen=True, slots=True)
class Holding:
    """One device held by one job, as the last sample saw it."""

    node: str
    index: int
    job: str
    name: str | None
    user: str
    state: str
    """``running`` or ``suspended`` (time-sliced out: its GPU kept, idle)."""

    def public(self, me: str | None) -> dict[str, Any]:
        """What ``me`` may see (None: an admin, everything): another user's job is only
        its user, as the usage chart shows it."""
        mine = me is None or me == self.user
        return {
            "user": self.user,
            "state": self.state,
            "job": self.job if mine else None,
            "name": self.name if mine else None,
        }


def holdings(rows: Iterable[JobRow]) -> tuple[Holding, ...]:
    """Each device the running and time-sliced-out jobs among ``rows`` hold."""
    held = []
    for row in rows:
        if row.state in (State.RUNNING, State.SUSPENDED):
            user, state = row.spec.user or "?", row.state.value
            for node, index in row.devices:
                held.append(Holding(node, index, row.id, row.spec.name, user, state))
    return tuple(held)


class UsageHistory:
    """The last ``KEPT`` samples, oldest first, and who held each device at the last
    (thread-safe)."""

    def __init__(self, kept: int = KEPT) -> None:
        self._lock = threading.Lock()
        self._samples: deque[Sample] = deque(maxlen=kept)
        self._held: tuple[Holding, ...] = ()

    def add(self, s: Sample, held: tuple[Holding, ...] = ()) -> None:
        with self._lock:
            self._samples.append(s)
            self._held = held

    def holdings(self) -> tuple[Holding, ...]:
        """Who held each device at the last sample."""
        with self._lock:
            return self._held

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
            history.add(sample(rows, clock()), holdings(rows))
        await asyncio.sleep(SAMPLE_S)
