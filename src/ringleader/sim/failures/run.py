"""Failures played in a simulation: nodes go out and come back, and the jobs on them stop.

The engine asks ``Failures`` when the next outage starts or ends
(``next_change``), and at that time lets it take nodes out of the cluster the
policy sees (``cluster``) or put them back (``apply``). A job on a node that
goes out stops at once, without a checkpoint unless the outage was planned:
it loses the progress since its last one (``Checkpointing``) and waits for
the policy to place it again, where it pays its restart. Between events each
running job checkpoints every ``interval_s`` of progress for ``cost_s``, so it
advances at ``interval / (interval + cost)`` of its speed (``JobState.kept``).

State is the run's own: ``Failures`` is made for one run and read after it
(``ledgers``, ``cluster_ledger``).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ringleader.policy.model.plan import WAIT
from ringleader.policy.model.views import ClusterView
from ringleader.sim.failures.checkpoints import Checkpointing
from ringleader.sim.failures.ledger import ClusterLedger, JobLedger
from ringleader.sim.failures.model import FailureModel, Outage
from ringleader.sim.jobs import JobState, per_node
from ringleader.sim.occupancy import Occupancy


@dataclass(slots=True)
class _Segment:
    """A job's run on one set of GPUs since its launch there (or resume)."""

    start: float
    ready_at: float
    workers: int
    devices: tuple[object, ...]
    interval_s: float
    cost_s: float

    @property
    def kept(self) -> float:
        """The share of its productive time that is progress, not checkpoint writes."""
        if self.cost_s <= 0 or math.isinf(self.interval_s):
            return 1.0
        return self.interval_s / (self.interval_s + self.cost_s)

    def productive(self, now: float) -> float:
        return max(0.0, now - self.ready_at)

    def since_checkpoint(self, now: float) -> float:
        """Seconds of progress since the last checkpoint: what a failure now loses."""
        productive = self.productive(now)
        if self.cost_s <= 0:
            return 0.0  # a free checkpoint is taken all the time
        if math.isinf(self.interval_s):
            return productive
        cycle = self.interval_s + self.cost_s
        return min(productive - math.floor(productive / cycle) * cycle, self.interval_s)


class Failures:
    """The outages of one run, and what they cost its jobs (see the module docstring)."""

    def __init__(
        self,
        outages: Sequence[Outage],
        cluster: ClusterView,
        *,
        model: FailureModel | None = None,
        checkpointing: Checkpointing | None = None,
        cost_s: Mapping[str, float] | None = None,
        every_s: Mapping[str, float] | None = None,
    ) -> None:
        self.outages = tuple(sorted(outages, key=lambda o: o.at))
        self.model = model or FailureModel()
        self.checkpointing = checkpointing or Checkpointing()
        self.cost_s = dict(cost_s or {})
        """Each job's own checkpoint cost, by id (others: ``checkpointing.cost_s``)."""
        self.every_s = dict(every_s or {})
        """Each job's own checkpoint interval, by id (others: ``checkpointing``'s rule)."""
        self._full = cluster
        self.cluster = cluster
        """The nodes that are up: what the policy is shown."""
        self._next = 0
        self._ends: list[tuple[float, int]] = []
        self._down: dict[str, int] = {}
        self._segments: dict[str, _Segment] = {}
        self._waiting: dict[str, tuple[float, int]] = {}
        self.ledgers: dict[str, JobLedger] = {}
        self.ended_at = 0.0
        """When the run stopped (``close_all``)."""

    def next_change(self) -> float:
        """When the next outage starts or ends (inf: none will)."""
        start = self.outages[self._next].at if self._next < len(self.outages) else math.inf
        end = self._ends[0][0] if self._ends else math.inf
        return min(start, end)

    def returning(self, now: float) -> bool:
        """Whether an outage ends by ``now``: nodes come back."""
        return bool(self._ends) and self._ends[0][0] <= now

    def apply(self, now: float, active: Mapping[str, JobState]) -> list[tuple[JobState, Outage]]:
        """Start and end the outages due by ``now``; the jobs to stop, each with the
        outage that stops it (the engine stops them: ``strike``)."""
        changed = False
        while self._ends and self._ends[0][0] <= now:
            _, i = heapq.heappop(self._ends)
            for node in self.outages[i].nodes:
                self._down[node] -= 1
                if not self._down[node]:
                    del self._down[node]
            changed = True
        struck: dict[str, tuple[JobState, Outage]] = {}
        while self._next < len(self.outages) and self.outages[self._next].at <= now:
            outage = self.outages[self._next]
            heapq.heappush(self._ends, (outage.until, self._next))
            self._next += 1
            nodes = set(outage.nodes)
            for node in nodes:
                self._down[node] = self._down.get(node, 0) + 1
            changed = True
            for state in active.values():
                if state.job.id not in struck and any(
                    d.node in nodes for d in state.devices[: state.workers]
                ):
                    struck[state.job.id] = (state, outage)
        if changed:
            up = tuple(n for n in self._full.nodes if n.name not in self._down)
            self.cluster = ClusterView(up)
        return list(struck.values())

    def strike(self, state: JobState, outage: Outage, now: float) -> float:
        """Account for ``state`` stopped by ``outage``; the share of the job it must do
        again (none where the outage was planned)."""
        ledger = self._ledger(state)
        if not outage.planned:
            ledger.interruptions += 1
            ledger.by_cause[outage.cause] = ledger.by_cause.get(outage.cause, 0) + 1
        segment = self._segments.get(state.job.id)
        lost = 0.0
        if segment is not None and not outage.planned and state.running:
            seconds = segment.since_checkpoint(now)
            lost = seconds * state.speed / segment.kept
            ledger.useful_s -= seconds
            ledger.useful_gpu_s -= seconds * segment.workers
            ledger.lose("failure", seconds, segment.workers)
        self._close(state, now)
        self._waiting[state.job.id] = (now, max(state.workers, 1))
        return lost

    def settle(self, now: float, active: Iterable[JobState]) -> None:
        """After a plan is carried out: open a segment for each job that runs on new
        GPUs, close those of jobs that stopped, and set each one's ``kept``."""
        for state in active:
            segment = self._segments.get(state.job.id)
            running = state.running
            if segment is not None and (
                not running or state.devices[: state.workers] != segment.devices
            ):
                self._close(state, now)
                segment = None
                if not running:
                    self._waiting[state.job.id] = (now, max(state.job.requested_gpus, 1))
            if running and segment is None:
                self._open(state, now)

    def finished(self, state: JobState, now: float) -> None:
        """The job ended at ``now``."""
        self._close(state, now)
        self._ledger(state).ended_at = now

    def close_all(self, active: Iterable[JobState], now: float) -> None:
        """The run stops at ``now``: count every job's time up to it."""
        self.ended_at = now
        for state in active:
            self._close(state, now)
            waited = self._waiting.pop(state.job.id, None)
            if waited is not None:
                self._ledger(state).lose("queueing", now - waited[0], waited[1])

    def cluster_ledger(self) -> ClusterLedger:
        return ClusterLedger.of(self.ledgers.values())

    def _ledger(self, state: JobState) -> JobLedger:
        ledger = self.ledgers.get(state.job.id)
        if ledger is None:
            job = state.job
            ledger = self.ledgers[job.id] = JobLedger(job.submitted_at, job.requested_gpus)
            self._waiting[job.id] = (job.submitted_at, max(job.requested_gpus, 1))
        return ledger

    def _open(self, state: JobState, now: float) -> None:
        ledger = self._ledger(state)
        waited = self._waiting.pop(state.job.id, None)
        if waited is not None:
            ledger.lose("queueing", now - waited[0], waited[1])
        devices = state.devices[: state.workers]
        cost = self.cost_s.get(state.job.id, self.checkpointing.cost_s)
        interval = self.every_s.get(state.job.id) or self.checkpointing.interval_s(
            cost, self.model, state.workers, len(per_node(devices))
        )
        segment = _Segment(now, state.ready_at, state.workers, devices, interval, cost)
        self._segments[state.job.id] = segment
        if state.kept != segment.kept:
            state.kept = segment.kept
            state.paced_for = (0, 0.0, 0.0)  # its speed must be worked out again

    def _close(self, state: JobState, now: float) -> None:
        segment = self._segments.pop(state.job.id, None)
        if segment is None:
            return
        ledger = self._ledger(state)
        productive = segment.productive(now)
        useful = productive * segment.kept
        ledger.useful_s += useful
        ledger.useful_gpu_s += useful * segment.workers
        ledger.lose("checkpoint", productive - useful, segment.workers)
        ledger.lose("restart", min(now, segment.ready_at) - segment.start, segment.workers)


def strike(
    failures: Failures, now: float, active: Mapping[str, JobState], occupancy: Occupancy
) -> tuple[bool, bool]:
    """Start and end the outages due by ``now`` (every running job advanced to it).

    A job on a node that goes out stops at once, its progress since its last
    checkpoint lost, and waits to be placed again. Gives whether any job stopped,
    and whether to decide now: one did, or nodes came back while a job waits. An
    outage that touches nobody waits for the next decision: a decision at 16,384
    GPUs costs tens of milliseconds, and a Llama 3-sized run meets a thousand of
    them.
    """
    returned = failures.returning(now)
    struck = failures.apply(now, active)
    for state, outage in struck:
        lost = failures.strike(state, outage, now)
        state.remaining = min(1.0, state.remaining + lost)
        was = (state.devices, state.workers, state.suspended)
        state.carry_out(WAIT, False)
        occupancy.change(was, state.devices, state.workers, state.suspended)
        state.state_since = now
        state.seen = None  # its progress went back
    if struck:
        return True, True
    return False, returned and any(not s.running for s in active.values())
