"""Deciding once a tick: the runtime's cadence, and a fast way through a large workload.

By default the simulator decides at every event. The runtime does not: its
controller ticks (0.5 s by default) and decides once in a tick over every
event since the last (``runtime.controller``). With ``tick_s`` the simulator
does the same: an arrival, a completion, a policy's wake-up or a round mark
between ticks is recorded when it happens (a job's GPUs free the moment it
ends), and the decision comes at the first multiple of ``tick_s`` at or after
it, once for all of them.

A coarse tick is also how to play a very large workload quickly: the cost of a
run is in its decisions, and a tick of a minute decides a hundred thousand
jobs a few thousand times instead of twice each. Jobs wait up to a tick to
start and a freed GPU idles up to a tick, so the schedule is not the one the
every-event run gives; ``bench/sim.py`` measures by how much.

Between decisions nobody's speed changes (a plan changes speeds, and so does a
job that shared a GPU or host ending, which the engine works out at once), so
running jobs need not be advanced event by event: ``Finishes`` knows when each
will end from the last time they were all brought up to date, and only a job
that ends is advanced on its own.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

from ringleader.sim.jobs import DONE, JobState


def tick_at_or_after(t: float, tick_s: float) -> float:
    """The first multiple of ``tick_s`` at or after ``t``: when an event at ``t`` is decided."""
    return max(t, math.ceil(t / tick_s) * tick_s)


class Finishes:
    """Running jobs by when they finish, as worked out at ``since``.

    Valid while no running job's speed, size or sharing changes: the engine makes
    one after each decision and after each change of speeds.
    """

    __slots__ = ("_heap", "since")

    def __init__(self, running: Sequence[JobState], since: float) -> None:
        self.since = since
        """When every running job was last advanced to."""
        heap = [(s.finish_time(since), i, s) for i, s in enumerate(running)]
        heapq.heapify(heap)  # (time, index): ties end in running order, as every event
        self._heap = heap

    @property
    def first(self) -> float:
        """When the next running job finishes (inf: none will)."""
        return self._heap[0][0] if self._heap else math.inf

    def ended(self, now: float, running: Sequence[JobState]) -> tuple[list[JobState], bool]:
        """The jobs that end by ``now``, taken out and advanced from ``since``; and whether
        every other job of ``running`` was brought up to ``now`` too.

        That happens where a job due to end had work left by rounding: it has moved on
        from ``since`` alone, so all move on with it, and the caller indexes them again.
        """
        heap = self._heap
        due: list[JobState] = []
        while heap and heap[0][0] <= now:
            state = heapq.heappop(heap)[2]
            state.advance(self.since, now)
            due.append(state)
        ended = [s for s in due if s.remaining <= DONE]
        if len(ended) == len(due):
            return ended, False
        moved = {id(s) for s in due}
        advance([s for s in running if id(s) not in moved], self.since, now)
        return ended, True


def advance(running: Sequence[JobState], start: float, end: float) -> None:
    """Move every running job on from ``start`` to ``end`` at its speed."""
    for state in running:
        state.advance(start, end)


def repace(running: Sequence[JobState]) -> None:
    """Work out again the speed of each running job whose epoch changed: at an epoch's end
    (where a ``phased`` profile's ``finish_time`` stops it), its new batch and gradient
    statistics set it (``JobState.pace``; the others keep theirs)."""
    for state in running:
        state.pace()
