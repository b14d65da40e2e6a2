"""The controller: one loop that observes jobs, decides, and acts on the decision.

Each tick (default 0.5 s) it reads what every running job reported, checks its
workers, and settles finished gangs (succeeded, stopped for a resize,
cancelled, crashed). On an event — a submission, a gang settling, a cancel —
or every ``round_s``, it builds the snapshot with the spine's ``job_view``,
runs the same round the simulator runs (``spine.round``: the users' quotas,
the policy's decision, each job's reason), and hands the Plan to its acting
half (``control.acting``), which carries out the actions the spine's ``diff``
derives from the Plan and what each job holds: stops, suspends, resumes and
launches, each only once the GPUs it needs are free.

The tick runs in a worker thread, off the API's event loop, so a slow
decision never delays a request.

Minibatch times are profiled separately for a job running alone and for it
packed beside each partner: introspection compares the two.

All state is in the store, except each live gang's clocks between ticks
(``control.gangs``); a controller started after a crash adopts the workers
that are still alive (they run in their own sessions) and settles those that
died meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence

from ringleader.policy.model.plan import Assignment, Plan
from ringleader.policy.model.views import ClusterView, Device, JobView
from ringleader.runtime.control.acting import Acting
from ringleader.runtime.control.config import ControllerConfig
from ringleader.runtime.control.gangs import Gangs
from ringleader.runtime.control.observing import Observing
from ringleader.runtime.control.progress import LIBRARY_GENERATION, ProgressIngest
from ringleader.runtime.control.reach import Reach
from ringleader.runtime.control.rowview import row_view, seed_kin
from ringleader.runtime.control.settling import Settling
from ringleader.runtime.control.telemetry import Telemetry
from ringleader.runtime.state.rows import JobRow, State
from ringleader.runtime.state.store import Store
from ringleader.runtime.workers.executor.base import Executor, ExecutorUnavailable
from ringleader.spine import reasons
from ringleader.spine.kin import KinBook
from ringleader.spine.observe import co_runners
from ringleader.spine.round import decide_round

log = logging.getLogger("ringleader.controller")

STARTING_TICK_S = 0.05
"""Tick interval while a launched gang's ranks have not all written their pid."""
SWITCH_TICK_S = 0.01
"""Tick interval while a time-slice switch is under way (a GPU idles until it is done)."""
LEAVE_WAIT_S = 30.0
"""The longest an orderly stop of the server waits for its jobs' checkpoints."""
KILLED_WAIT_S = 10.0
"""Then, after the kill, the longest it waits to see the killed gangs end: a stop
always ends, whatever the executor can still see."""


class Controller(Observing):
    def __init__(self, store: Store, executor: Executor, config: ControllerConfig) -> None:
        self.store = store
        self.executor = executor
        self.config = config
        self.cluster = executor.cluster()
        self.progress = ProgressIngest(config.progress_cap_bytes)
        """What each job reported, folded into its row each look (``control.progress``)."""
        self.gangs = Gangs()
        """Each live gang's clocks and marks between ticks (``control.gangs``)."""
        self._plan: Plan | None = None
        self._targets: dict[str, Assignment] = {}
        self._views: dict[str, tuple[object, Assignment | None, ClusterView, JobView]] = {}
        """The last decision's view of each queued job, with what it was made from."""
        self._kin = KinBook()
        """What each model's jobs measured (``spine.kin``): the last finished ones', read
        back at start (``rowview.seed_kin``), and every job's since."""
        seed_kin(self._kin, store, self.cluster)
        self._queued_at_read: set[str] = set()
        """Jobs this tick read as queued: left as read until the decision (``view``)."""
        self._broken: dict[str, str] = {}
        """Jobs whose files this controller cannot handle, with the last error logged."""
        self._partners: dict[str, tuple[str, ...]] = {}
        """Jobs running beside each running job at the start of this tick (packed with it)."""
        self._switching = False
        """A job waits for another to leave its GPU: tick fast until it has."""
        self._look_soon = False
        """A gang was launched whose ranks have not all said they started: look again
        soon, so the exit watch holds their pids even if they end before ``tick_s``."""
        self._need_decision = True
        self._last_decision = 0.0
        self._wake_at: float | None = None
        self._running = False
        self._wake: Callable[[], None] = lambda: None
        """Ends the loop's wait for the next tick (set by ``run``; callable from any thread)."""
        self.decisions = 0
        self.reach = Reach()
        """Whether the executor answers; while it does not, every job is held as it is
        (``control.reach``)."""
        self.telemetry = Telemetry()
        """Histograms and counters for ``GET /metrics``."""
        self.reasons: dict[str, reasons.Reason] = {}
        """Why each job waits, or has the GPUs it runs on, as of the last decision
        (``spine.reasons``)."""
        self.acting = Acting(
            store,
            executor,
            config,
            self.gangs,
            self.telemetry,
            self.progress.suspended,
            set(),
            kin=self._kin,
        )
        """The acting half: carries out each Plan (``control.acting``)."""
        self.settling = Settling(store, config, self.gangs, self.progress.suspended)
        """Ends each gang that ended: what became of the job (``control.settling``)."""

    def poke(self) -> None:
        """Something changed outside the loop (a submission, a cancel): decide now."""
        self._need_decision = True
        self._wake()

    # -- the loop ------------------------------------------------------------
    async def run(self) -> None:
        """Tick every ``tick_s``, and at once when poked or when a worker exits.

        Woken, a GPU changes hands within milliseconds of its job's end
        instead of at the next regular look (``bench/control_plane.py``).
        """
        self._running = True
        loop = asyncio.get_running_loop()
        woken = asyncio.Event()

        def wake() -> None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: nothing to wake
                loop.call_soon_threadsafe(woken.set)

        self._wake = wake
        self.executor.on_exit(wake)
        while self._running:
            woken.clear()
            try:
                # Off the event loop: the API answers while the policy decides.
                await asyncio.to_thread(self.tick)
            except Exception:  # keep serving; the next tick retries from the store
                log.exception("controller tick failed")
            wait_s = self.config.tick_s
            if self._look_soon:
                wait_s = min(wait_s, STARTING_TICK_S)
            if self._switching:
                wait_s = SWITCH_TICK_S
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(woken.wait(), wait_s)

    def stop(self) -> None:
        self._running = False

    def leave(self, wait_s: float = LEAVE_WAIT_S) -> int:
        """The server's orderly stop: no process of any job outlives it; how many were stopped.

        Each running or suspended gang is stopped as for a preemption (the
        job library checkpoints; a command without it gets SIGTERM), killed
        after its ``stop_grace_s`` or ``wait_s``, whichever comes first, and
        its job queued again: the next server resumes it from its checkpoint.
        A pending cancel settles as a cancel. Call it after ``run`` has ended.
        """
        live = self._live()
        count = len(live)
        if live:
            log.info("stopping %d running jobs (checkpoint, at most %.0f s)", count, wait_s)
        for row in live:
            if row.stopping is None:
                self.acting.request_stop(row, "server_stop", time.time())
        deadline, killed = time.monotonic() + wait_s, False
        while live:
            if time.monotonic() > deadline:
                if killed:
                    # Killed and still not seen to end (a gang whose processes never
                    # started): the next server on this state dir settles it.
                    names = ", ".join(r.id for r in live)
                    log.warning("leaving %d jobs to the next server: %s", len(live), names)
                    break
                for row in live:
                    self.gangs.of(row.id).stop_killed = True  # ours: not the job's failure
                    self.executor.kill(self.job_dir(row.id), row.generation)
                deadline, killed = time.monotonic() + KILLED_WAIT_S, True
            for row in live:
                self._observe_one(row, time.time())
            live = self._live()
            if live:
                time.sleep(0.05)
        return count

    def _live(self) -> list[JobRow]:
        return [r for r in self.store.unfinished() if r.state in (State.RUNNING, State.SUSPENDED)]

    def tick(self, now: float | None = None) -> None:
        now = time.time() if now is None else now
        self._look_soon = False
        if self.reach.away:
            if not self._refresh_cluster(now):
                return
            self._need_decision = True  # it answers again: pick up where it left off
        rows = self.store.unfinished()
        self._queued_at_read = {r.id for r in rows if r.state is State.QUEUED}
        self._partners = co_runners(
            {
                r.id: [Device(n, i) for n, i in r.devices]
                for r in rows
                if r.state is State.RUNNING and r.stopping is None
            }
        )
        # One read of the job table a tick: with a long queue, reading (and
        # parsing) it again to decide and to act was a third of the tick each.
        seen: list[JobRow] = []
        for row in rows:
            if self._observe_one(row, now):
                seen.append(row)
            elif self.reach.away:
                return  # a look found the executor away: nothing more to learn or do
            elif (fresh := self.store.get(row.id)) is not None:
                seen.append(fresh)  # as stored: its trouble may have left ``row`` half changed
        rows = [r for r in seen if not r.state.finished]
        due = now - self._last_decision >= self.config.round_s
        woken = self._wake_at is not None and now >= self._wake_at
        if self._need_decision or due or woken:
            self._decide(now, rows)
        try:
            self._apply(now, rows)
        except ExecutorUnavailable as err:
            self.reach.lost(err, now)
            return
        if self.config.traffic is not None and self._plan is not None:
            self.acting.shape(self.config.traffic, self._plan, rows)

    def _refresh_cluster(self, now: float) -> bool:
        """Read the executor's nodes again (they come and go: Ray); False, and the executor
        marked away (``control.reach``), where it does not answer."""
        try:
            cluster = self.executor.cluster()
        except ExecutorUnavailable as err:
            self.reach.lost(err, now)
            return False
        self.reach.back(now)
        if cluster != self.cluster:  # else the same object: views made on it still hold
            self.cluster = cluster
        return True

    # -- deciding ------------------------------------------------------------
    def view(self, row: JobRow) -> JobView:
        """The job as the policy sees it (``control.rowview``).

        A queued job whose stored row has not changed since the last decision,
        with the same target, cluster and kin, keeps the view it had: with a long
        queue, building every waiting job's view again was most of a decision
        (``docs/scale.md``).
        """
        target = self._targets.get(row.id)
        read = row.read_as
        reusable = read is not None and row.state is State.QUEUED and row.id in self._queued_at_read
        if reusable:
            last = self._views.get(row.id)
            if last is not None and last[:3] == (read, target, self.cluster):
                kept = last[3]
                if not kept.kin or kept.kin is self._kin.kin(kept.shape):
                    return kept
        view = row_view(
            row,
            self.cluster,
            target,
            needs=self.config.policy.needs,
            restart_s=self.config.restart_s,
            book=self._kin,
        )
        if reusable:
            self._views[row.id] = (read, target, self.cluster, view)
        return view

    def _decide(self, now: float, unfinished: Sequence[JobRow] | None = None) -> None:
        """Decide a new Plan for the ``unfinished`` jobs (read from the store if not given)."""
        rows = [
            r
            for r in (self.store.unfinished() if unfinished is None else unfinished)
            if r.state in (State.QUEUED, State.RUNNING, State.SUSPENDED) and not r.cancel_requested
        ]
        try:
            if not self._refresh_cluster(now):
                return  # decided once it answers: ``_need_decision`` stays as it is
        except Exception:
            log.exception("cannot list the cluster's nodes; deciding on the last known list")
        self._need_decision = False
        self._last_decision = now
        started = time.perf_counter()
        views = [self.view(r) for r in rows]
        if len(self._views) > len(rows):  # forget the jobs that have left the queue
            deciding = {r.id for r in rows}
            self._views = {k: v for k, v in self._views.items() if k in deciding}
        owner = {r.id: r.spec.user for r in rows}
        quotas = self.config.quotas()
        try:
            decided = decide_round(
                self.config.policy,
                views,
                self.cluster,
                now,
                owner=owner,
                quotas=quotas,
                explain=True,
                batched=_reported_batches(rows),
            )
        except Exception:
            log.exception("policy %s failed; keeping the current state", self.config.policy.name)
            return
        plan = decided.plan
        generation = {r.id: r.generation for r in rows}
        self.acting.rebatch = {j: generation[j] for j in decided.rebatch}
        self.telemetry.decision.observe(time.perf_counter() - started)
        self.reasons = decided.reasons
        self.decisions += 1
        self._wake_at = plan.wake_at
        self._plan = plan
        self._targets = dict(plan.assignments)
        self._log_plan(plan, rows)

    def _log_plan(self, plan: Plan, rows: Sequence[JobRow]) -> None:
        if log.isEnabledFor(logging.INFO):
            sizes = {
                r.id: f"{a.workers}{' suspended' if a.suspended else ''}"
                for r in rows
                for a in [plan.of(r.id)]
            }
            wake = "" if plan.wake_at is None else f", next decision at {plan.wake_at:.1f}"
            log.info("plan (%s): %s%s", self.config.policy.name, sizes, wake)

    # -- acting ------------------------------------------------------------
    def _apply(self, now: float, rows: Sequence[JobRow]) -> None:
        """Carry out the latest plan (``control.acting``)."""
        if self._plan is None:
            return
        self._switching = False  # as it stays if ``apply`` fails
        try:
            self._switching = self.acting.apply(
                now, rows, self._plan, self._targets, self.cluster, self.reasons
            )
        finally:
            if self.acting.launched:
                self._look_soon, self.acting.launched = True, False


def _reported_batches(rows: Sequence[JobRow]) -> set[str]:
    """The jobs that take their batch at a launch and whose running generation has said
    what it runs at: a view of one that has not tells the last generation's share."""
    return {
        r.id
        for r in rows
        if r.spec.batch is not None and r.shape.get(LIBRARY_GENERATION) == r.generation
    }
