"""The controller: one loop that turns the policy's Plans into process actions.

Each tick (default 0.5 s) it reads what every running job reported, checks its
workers, and settles finished gangs (succeeded, stopped for a resize,
cancelled, crashed). On an event — a submission, a gang settling, a cancel —
or every ``round_s``, it builds the snapshot with the spine's ``job_view``,
calls the same ``decide`` the simulator calls, and applies the actions the
spine's ``diff`` derives from the Plan and what each job holds:

* ``Stop`` (resize, migrate, preempt, cancel): a job that uses the job
  library is asked to checkpoint and stop at its next minibatch boundary;
  any other command gets SIGTERM at once, as under torchrun or Slurm. Either
  is killed (SIGKILL to its process groups) ``stop_grace_s`` later;
* ``Suspend`` (time-slicing): the job is asked to suspend at its next
  boundary: it frees the device and waits in host memory. A command without
  the library cannot suspend, so its turn ends with a stop instead;
* ``Launch`` and ``Resume`` wait until the job's GPUs are free — a GPU is free
  when nothing runs on it that the plan does not also run there (packing) —
  so two generations of a job never run at once and no GPU is given twice.

The tick runs in a worker thread, off the API's event loop, so a slow
decision never delays a request.

Minibatch times are profiled separately for a job running alone and for it
packed beside each partner: introspection compares the two.

All state is in the store; a controller started after a crash adopts the
workers that are still alive (they run in their own sessions) and settles
those that died meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ringleader.job.checkpoint import ON_BAD_CHECKPOINT_ENV
from ringleader.job.control import (
    CHECKPOINTS,
    PROGRESS,
    Action,
    Control,
    last_event,
    last_record,
    write_control,
)
from ringleader.job.records import read_regular
from ringleader.net.tc import NetCommandError
from ringleader.policy.plan import Assignment, Decider, Plan
from ringleader.policy.views import Device, JobView
from ringleader.runtime.bounded import LOG_CAP_BYTES, PROGRESS_CAP_BYTES, cap_log
from ringleader.runtime.executor.base import Executor
from ringleader.runtime.gpus import (
    EFFECTIVE,
    effective_weight,
    gang_type,
    types_detail,
)
from ringleader.runtime.progress import (
    LIBRARY_GENERATION,
    STOP_ASKED,
    STOP_GENERATION,
    ProgressIngest,
)
from ringleader.runtime.rowview import held, row_view
from ringleader.runtime.store import JobRow, State, Store, disk_full
from ringleader.runtime.telemetry import Telemetry
from ringleader.runtime.traffic import TrafficControl, merged_ranks
from ringleader.spine import quota, reasons
from ringleader.spine.actions import Kind, Launch, Resume, Stop, Suspend, diff_one
from ringleader.spine.observe import co_runners

log = logging.getLogger("ringleader.controller")

STARTING_TICK_S = 0.05
"""Tick interval while a launched gang's ranks have not all written their pid."""
SWITCH_TICK_S = 0.01
"""Tick interval while a time-slice switch is under way (a GPU idles until it is done)."""
LOG_CHECK_S = 5.0
"""How often a running job's logs are checked against their cap."""
UNAWARE_AFTER_S = 20.0
"""A generation silent this long after its launch does not use the job library."""


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    state_dir: Path
    policy: Decider
    round_s: float = 30.0
    tick_s: float = 0.5
    launch_timeout_s: float = 120.0
    restart_s: float = 3.0
    """A resize's cost until a job's own is measured: a cold checkpoint-stop-restart of
    a small ResNet here (bench/results/resize.json, medians 2.9-3.4 s)."""
    log_cap_bytes: int = LOG_CAP_BYTES
    """A rank's log is rotated to ``.1`` past this (0: never; ``ringleader.runtime.bounded``)."""
    progress_cap_bytes: int = PROGRESS_CAP_BYTES
    """The progress file is rotated to ``.1`` past this (0: never)."""
    quotas: Callable[[], Mapping[str, int]] = dict
    """Each user's GPU quota, read at every decision (``ringleader.spine.quota``)."""
    run_as: Callable[[str], int | None] | None = None
    """The uid a user's jobs run as (None: unknown user); None: as the server's own user."""
    traffic: TrafficControl | None = None
    """Applies the plan's traffic ranks on this host's NIC (None: no ``--traffic-device``)."""


def log_tail(job_dir: Path, lines: int = 20) -> str:
    """The last lines of every rank's log, for a failed job's error message."""
    out = []
    for path in sorted((job_dir / "logs").glob("rank*.log")):
        # Only the end of each log, and only a regular file: the job wrote it.
        try:
            size = path.lstat().st_size
        except OSError:
            continue
        raw = read_regular(path, max(0, size - LOG_TAIL_BYTES), LOG_TAIL_BYTES)
        if raw is None:
            continue
        text = raw.decode(errors="replace").splitlines()
        out.append(f"[{path.stem}] " + "\n".join(text[-lines:]))
    return "\n".join(out)[-4000:]


LOG_TAIL_BYTES = 64 << 10


class Controller:
    def __init__(self, store: Store, executor: Executor, config: ControllerConfig) -> None:
        self.store = store
        self.executor = executor
        self.config = config
        self.cluster = executor.cluster()
        self.progress = ProgressIngest(config.progress_cap_bytes)
        """What each job reported, folded into its row each look (``runtime.progress``)."""
        self._stop_sent: dict[str, float] = {}
        self._launched: dict[str, float] = {}
        self._plan: Plan | None = None
        self._targets: dict[str, Assignment] = {}
        self._held_since: dict[str, float] = {}
        self._partial_since: dict[str, float] = {}
        self._stop_killed: set[str] = set()
        """Jobs killed because a requested stop did not come: settled as stopped."""
        self._terminated: dict[str, set[int]] = {}
        """Ranks of a stopping job that have been sent SIGTERM (it is retried for the rest)."""
        self._logs_capped: dict[str, float] = {}
        """When each running job's logs were last checked against their cap."""
        self._broken: dict[str, str] = {}
        """Jobs whose files this controller cannot handle, with the last error logged."""
        self._no_room: set[str] = set()
        """Jobs whose last action a full disk stopped (logged once, until it goes ahead)."""
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
        self.telemetry = Telemetry()
        """Histograms and counters for ``GET /metrics``."""
        self.reasons: dict[str, reasons.Reason] = {}
        """Why each job waits, or has the GPUs it runs on, as of the last decision
        (``spine.reasons``)."""

    def job_dir(self, job_id: str) -> Path:
        return self.config.state_dir / "jobs" / job_id

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

    def tick(self, now: float | None = None) -> None:
        now = time.time() if now is None else now
        self._look_soon = False
        rows = self.store.unfinished()
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
            elif (fresh := self.store.get(row.id)) is not None:
                seen.append(fresh)  # as stored: its trouble may have left ``row`` half changed
        rows = [r for r in seen if not r.state.finished]
        due = now - self._last_decision >= self.config.round_s
        woken = self._wake_at is not None and now >= self._wake_at
        if self._need_decision or due or woken:
            self._decide(now, rows)
        self._apply(now, rows)
        if self.config.traffic is not None and self._plan is not None:
            self._shape(self.config.traffic, self._plan, rows)

    # -- observing -----------------------------------------------------------
    def _observe_one(self, row: JobRow, now: float) -> bool:
        """Observe one job; its own trouble (an unreadable file) never stops the others.

        False if it had trouble.
        """
        try:
            self._observe(row, now)
        except Exception as err:
            message = f"{type(err).__name__}: {err}"
            if self._broken.get(row.id) != message:
                log.exception("job %s: cannot observe it; other jobs carry on", row.id)
            self._broken[row.id] = message
            return False
        self._broken.pop(row.id, None)
        return True

    def _observe(self, row: JobRow, now: float) -> None:
        if row.cancel_requested and row.state is State.QUEUED:
            row.state, row.finished_at = State.CANCELLED, now
            self.store.save(row, "cancelled")
            self._need_decision = True
            return
        if row.state not in (State.RUNNING, State.SUSPENDED):
            return
        since = self._held_since.get(row.id, now)
        if row.state is State.RUNNING:
            held_s = row.workers * max(0.0, now - since)
            row.attained_gpu_s += held_s
            if self.cluster.heterogeneous:
                weight = effective_weight(self.cluster, row.devices, row.type_observations)
                row.shape[EFFECTIVE] = row.shape.get(EFFECTIVE, 0.0) + held_s * weight
        self._held_since[row.id] = now
        self._ingest(row)
        if now - self._logs_capped.get(row.id, 0.0) >= LOG_CHECK_S:
            self._logs_capped[row.id] = now
            for path in (self.job_dir(row.id) / "logs").glob("rank*.log"):
                if cap_log(path, self.config.log_cap_bytes):
                    log.info(
                        "job %s: %s rotated (cap %d bytes)",
                        row.id,
                        path.name,
                        self.config.log_cap_bytes,
                    )
        if row.cancel_requested and row.stopping != "cancel":
            self._request_stop(row, "cancel", now)
        status = self.executor.status(self.job_dir(row.id), row.generation, row.workers)
        if status.lost:
            log.warning("job %s: %d workers lost with their node", row.id, status.lost)
            self.executor.kill(self.job_dir(row.id), row.generation)
            if row.stopping is None:
                row.stopping = "node_lost"
            self._settle(row, failed=False, codes=dict(status.exits), now=now)
            return
        signalled = SIGNALLED in row.shape
        if signalled and row.stopping and not status.finished:
            self._terminate(row)
        if status.failed and not status.finished and not signalled:
            # After a SIGTERM, one rank's end is no failure: the others may
            # still be writing their checkpoint, so they get their grace.
            log.warning("job %s: a worker failed, stopping the rest", row.id)
            self.executor.kill(self.job_dir(row.id), row.generation)
            return
        if (
            row.stopping
            and row.id not in self._stop_killed
            and now - self._stop_sent.setdefault(row.id, now) > row.spec.stop_grace_s
        ):
            log.warning("job %s: no clean stop in time, killing it", row.id)
            self.executor.kill(self.job_dir(row.id), row.generation)
            self._stop_killed.add(row.id)
            return  # settled at the next look, once the kill has taken
        if row.id in self._stop_killed:
            # Our kill, after a stop we asked for: the job lost at most its work
            # since the last checkpoint, through no fault of its own.
            if status.finished:
                self._settle(row, failed=False, codes=dict(status.exits), now=now)
            return
        if signalled and status.finished:
            # Asked to stop by signal: however each rank ended, the job was stopped.
            self._settle(row, failed=False, codes=dict(status.exits), now=now)
            return
        if status.starting:
            self._look_soon = True  # the exit watch learns a rank's pid at a look
            # Ranks that never said they started: not placed yet (a Ray cluster
            # shared with other work) or lost on the way (a launcher that died).
            # The others would wait in the rendezvous for ever, so give up and
            # relaunch; it is the job's failure only if a rank failed.
            since = self._partial_since.setdefault(row.id, now)
            if now - since > self.config.launch_timeout_s:
                log.warning("job %s: %d ranks never started; relaunching", row.id, status.starting)
                self._partial_since.pop(row.id, None)
                self.executor.kill(self.job_dir(row.id), row.generation)
                failed = any(code != 0 for code in status.exits.values())
                if row.stopping is None and not failed:
                    row.stopping = "placement_timeout"
                self._settle(row, failed=failed, codes=dict(status.exits), now=now)
            return
        self._partial_since.pop(row.id, None)
        if not status.finished:
            self._launched.pop(row.id, None)
            return
        if (
            not status.exits
            and now - self._launched.setdefault(row.id, now) < self.config.launch_timeout_s
        ):
            return  # launched, not yet started
        self._settle(row, failed=status.failed, codes=dict(status.exits), now=now)

    def _ingest(self, row: JobRow) -> None:
        partners = self._partners.get(row.id, ()) if row.state is State.RUNNING else ()
        gpu_type = gang_type(self.cluster, row.devices)
        self.progress.ingest(row, self.job_dir(row.id) / PROGRESS, partners, gpu_type)
        self.store.save_progress(row)

    def _ran_to_end(
        self, row: JobRow, generation: int, reason: str | None, codes: dict[int, int]
    ) -> bool:
        """Whether a gang that exited without failing finished the job's training.

        The job library says so itself: its last event is ``done`` or
        ``stopped``. Without either (a command that does not use the library)
        a clean exit of every rank is the command ending on its own, unless we
        killed it (node lost, ranks that never started).
        """
        said = last_event(self.job_dir(row.id) / PROGRESS, generation, ("done", "stopped"))
        if said is not None:
            return said == "done"
        if reason in ("node_lost", "placement_timeout") or row.id in self._stop_killed:
            return False
        if SIGNALLED in row.shape:
            return False  # it ended because we asked it to: a checkpoint, not the end
        return bool(codes) and all(code == 0 for code in codes.values())

    def _settle(self, row: JobRow, *, failed: bool, codes: dict[int, int], now: float) -> None:
        reason, gen = row.stopping, row.generation
        row.stopping = None
        row.state_since = now
        self.progress.suspended.discard(row.id)
        row.workers, row.devices = 0, []
        self._held_since.pop(row.id, None)
        self._stop_sent.pop(row.id, None)
        self._launched.pop(row.id, None)
        self._need_decision = True
        done = self._ran_to_end(row, gen, reason, codes)
        self._stop_killed.discard(row.id)
        self._terminated.pop(row.id, None)
        self._logs_capped.pop(row.id, None)
        row.shape.pop(SIGNALLED, None)
        if reason == "cancel":
            row.state, row.finished_at = State.CANCELLED, now
            self.store.save(row, "cancelled", generation=gen)
        elif not failed and done:
            row.state, row.finished_at = State.SUCCEEDED, now
            self.store.save(row, "succeeded", generation=gen, step=row.step)
        elif not failed:
            row.state = State.QUEUED
            self.store.save(row, "stopped", generation=gen, reason=reason, step=row.step)
        else:
            row.attempts += 1
            tail = log_tail(self.job_dir(row.id))
            row.error = f"generation {gen} exited with codes {codes or 'unknown'}\n{tail}"
            damaged = self._damaged_checkpoints(row.id, gen)
            if damaged is not None:
                # Every retry would meet the same damage: failed now, saying why.
                row.error = f"{damaged}\n{row.error}"
                row.state, row.finished_at = State.FAILED, now
                self.store.save(
                    row, "failed", generation=gen, codes=codes, reason="checkpoints_damaged"
                )
            elif row.attempts <= row.spec.retries:
                row.state = State.QUEUED
                self.store.save(
                    row, "restarting", generation=gen, codes=codes, attempt=row.attempts
                )
            else:
                row.state, row.finished_at = State.FAILED, now
                self.store.save(row, "failed", generation=gen, codes=codes)

    def _damaged_checkpoints(self, job_id: str, generation: int) -> str | None:
        """The error for a gang that ended because every checkpoint is damaged, if it did.

        The job library says so (``checkpoints_damaged``) before it exits
        non-zero, unless the spec's ``on_bad_checkpoint`` is ``restart``.
        """
        job_dir = self.job_dir(job_id)
        said = last_record(job_dir / PROGRESS, generation, ("checkpoints_damaged",))
        if said is None:
            return None
        why = str(said.get("why", "no reason given"))[:300]
        return (
            f"every checkpoint in {job_dir / CHECKPOINTS} is damaged ({why}); failed rather "
            "than start over from step 0. Submit the job again to start over, or give "
            "`on_bad_checkpoint: restart` in a spec to have the job start over by itself."
        )

    def _count(self, row: JobRow, kind: Kind) -> None:
        """One counted event (``spine.actions.Kind``): on the job's row and in /metrics."""
        row.counts[kind.value] = row.counts.get(kind.value, 0) + 1
        self.telemetry.events.labels(kind.value).inc()

    # -- deciding ------------------------------------------------------------
    def view(self, row: JobRow) -> JobView:
        """The job as the policy sees it (``runtime.rowview``)."""
        return row_view(
            row,
            self.cluster,
            self._targets.get(row.id),
            needs=self.config.policy.needs,
            restart_s=self.config.restart_s,
        )

    def _decide(self, now: float, unfinished: Sequence[JobRow] | None = None) -> None:
        """Decide a new Plan for the ``unfinished`` jobs (read from the store if not given)."""
        rows = [
            r
            for r in (self.store.unfinished() if unfinished is None else unfinished)
            if r.state in (State.QUEUED, State.RUNNING, State.SUSPENDED) and not r.cancel_requested
        ]
        try:
            self.cluster = self.executor.cluster()  # nodes come and go (Ray)
        except Exception:
            log.exception("cannot list the cluster's nodes; deciding on the last known list")
        self._need_decision = False
        self._last_decision = now
        started = time.perf_counter()
        views = [self.view(r) for r in rows]
        owner = {r.id: r.spec.user for r in rows}
        quotas = self.config.quotas()
        admitted, held_back = quota.admit(views, owner, quotas)
        try:
            plan = self.config.policy.decide(admitted, self.cluster, now)
        except Exception:
            log.exception("policy %s failed; keeping the current state", self.config.policy.name)
            return
        plan, trimmed = quota.trim(plan, views, owner, quotas)
        self.telemetry.decision.observe(time.perf_counter() - started)
        self.reasons = reasons.explain(
            plan,
            views,
            owner,
            self.cluster.capacity,
            held_back | trimmed,
            now=now,
            cluster=self.cluster,
        )
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

    def _suspend(self, row: JobRow, now: float) -> None:
        uses = self._uses_library(row, now)
        if uses is None:
            return  # not known yet: asked again at the next tick, once it is
        if not uses:
            # It would never answer a suspend: its turn ends the torchrun way,
            # SIGTERM and a later relaunch from its own checkpoint.
            self._request_stop(row, "suspend", now)
            return
        log.info("suspending %s", row.id)
        self._count(row, Kind.SUSPEND)
        write_control(self.job_dir(row.id), Control(row.generation, Action.SUSPEND))
        row.state, row.state_since = State.SUSPENDED, now
        self.store.save(row, "suspend_requested", generation=row.generation)

    def _resume(self, row: JobRow, now: float) -> None:
        log.info("resuming %s", row.id)
        self._count(row, Kind.RESUME)
        write_control(self.job_dir(row.id), Control(row.generation, Action.RUN))
        row.state, row.state_since = State.RUNNING, now
        self.store.save(row, "resume_requested", generation=row.generation)

    def _request_stop(self, row: JobRow, reason: str, now: float) -> None:
        # Saved before the job can see it: a crash in between must leave a
        # job that is known to be stopping, not one whose exit looks like done.
        row.stopping = reason
        self._stop_sent[row.id] = now
        if reason in ("resize", "migrate"):
            # Its restart is timed from here to the next generation's first step.
            row.shape[STOP_ASKED], row.shape[STOP_GENERATION] = now, row.generation
        by_signal = self._uses_library(row, now) is not True
        if by_signal:
            row.shape[SIGNALLED] = now
        self.store.save(
            row, "stop_requested", reason=reason, generation=row.generation, signal=by_signal
        )
        write_control(self.job_dir(row.id), Control(row.generation, Action.STOP))
        if by_signal:
            self._terminate(row)

    def _uses_library(self, row: JobRow, now: float) -> bool | None:
        """Whether this generation obeys control.json (the job library), if known yet.

        Known True once it has written progress (the library says so as it
        starts), False once it has run ``UNAWARE_AFTER_S`` without a word.
        Before that a stop goes both ways, control.json and SIGTERM: the
        library takes SIGTERM for the same stop at a minibatch boundary.
        """
        if row.shape.get(LIBRARY_GENERATION) == row.generation:
            return True
        if now - row.state_since >= UNAWARE_AFTER_S:
            return False
        return None

    def _terminate(self, row: JobRow) -> None:
        """SIGTERM to each rank once; ranks not started yet get theirs at a later look."""
        done = self._terminated.setdefault(row.id, set())
        if len(done) < row.workers:
            done |= self.executor.terminate(
                self.job_dir(row.id), row.generation, skip=frozenset(done)
            )

    # -- acting --------------------------------------------------------------
    def _apply(self, now: float, rows: Sequence[JobRow]) -> None:
        """Carry out the spine's actions for the latest plan, as far as the GPUs allow.

        Stops and suspends are asked for at once. A launch or a resume waits
        until its GPUs are free, and a job being stopped is left alone until
        its old generation has exited (then it is queued and diffed again).
        """
        plan = self._plan
        if plan is None:
            return
        blocked = self._blocked(rows)
        self._switching = False
        for row in rows:
            if row.cancel_requested or row.stopping:
                continue
            if row.state not in (State.QUEUED, State.RUNNING, State.SUSPENDED):
                continue
            before = (row.state, row.generation, row.stopping)
            try:
                for action in diff_one(row.id, held(row), plan):
                    if isinstance(action, Stop):
                        self._request_stop(row, action.why.value, now)
                        break
                    if isinstance(action, Suspend):
                        self._suspend(row, now)
                        continue
                    wanted = plan.of(row.id).active_devices
                    if any(blocked.get((d.node, d.index), set()) - {row.id} for d in wanted):
                        # Its GPUs are still being given back: by a stop (seconds) or a
                        # suspend (one minibatch, so look again very soon).
                        self._switching = self._switching or any(
                            r.state is State.SUSPENDED and r.id not in self.progress.suspended
                            for r in rows
                        )
                    elif isinstance(action, Resume):
                        self._resume(row, now)
                    elif isinstance(action, Launch):
                        self._launch(row, action, now)
            except (OSError, sqlite3.Error) as err:
                if not disk_full(err):
                    raise
                self._wait_for_room(row, err)
            else:
                if row.id in self._no_room and (row.state, row.generation, row.stopping) != before:
                    self._no_room.discard(row.id)  # what the full disk stopped has been done
                    self.reasons.pop(row.id, None)  # the next decision says any other
                    log.info("job %s: the disk has room again", row.id)

    def _shape(self, traffic: TrafficControl, plan: Plan, rows: Sequence[JobRow]) -> None:
        """Keep the NIC's filters on the plan's ranks, for the PSes that run now."""
        ranks = merged_ranks(plan.traffic)
        running = {
            r.id: (self.job_dir(r.id), r.generation)
            for r in rows
            if r.id in ranks and r.state is State.RUNNING
        }
        try:
            traffic.carry_out(ranks, running)
        except (OSError, NetCommandError):
            log.exception("cannot apply traffic ranks on %s", traffic.agent.device)

    def _wait_for_room(self, row: JobRow, err: OSError | sqlite3.Error) -> None:
        """A full disk stopped an action on ``row`` (its control file, its record, its
        start): the job stays as it was, saying why, and every other job carries on.

        It is not failed: on a full disk that could not be recorded either (the
        database is there too), and nothing is wrong with the job. The action
        is tried again at each tick and goes ahead once there is room.
        """
        what = err.strerror if isinstance(err, OSError) else str(err)
        why = f"the disk holding {self.config.state_dir} is full ({what}); waiting for room"
        self.reasons[row.id] = reasons.Reason(reasons.DISK_FULL, why)
        if row.id not in self._no_room:
            self._no_room.add(row.id)
            log.error("job %s: %s", row.id, why)

    def _blocked(self, rows: Sequence[JobRow]) -> dict[tuple[str, int], set[str]]:
        """GPUs not free for anyone else to start on, and the jobs holding them.

        Held by a job that is stopping, by one asked to suspend that has not
        yet confirmed it freed the device, or by a running job the plan does
        not keep running there; a job the plan keeps running may share its GPU
        with another the plan runs there too (packing).
        """
        blocked: dict[tuple[str, int], set[str]] = {}
        for r in rows:
            if r.state not in (State.RUNNING, State.SUSPENDED):
                continue
            target = self._targets.get(r.id)
            keeps_running = (
                r.state is State.RUNNING
                and target is not None
                and target.running
                and {(d.node, d.index) for d in target.active_devices} == set(map(tuple, r.devices))
            )
            settled_suspend = r.state is State.SUSPENDED and r.id in self.progress.suspended
            if r.stopping or not (keeps_running or settled_suspend):
                for n, i in r.devices:
                    blocked.setdefault((n, i), set()).add(r.id)
        return blocked

    def _launch(self, row: JobRow, action: Launch, now: float) -> None:
        job_dir = self.job_dir(row.id)
        devices = action.devices
        uid = None
        if self.config.run_as is not None:
            uid = self.config.run_as(row.spec.user)
            if uid is None:  # the owner was removed: nobody to run it as
                row.state, row.finished_at = State.FAILED, now
                row.error = f"user {row.spec.user!r} no longer exists; the job cannot run"
                self.store.save(row, "failed", reason="owner_removed")
                return
        row.generation += 1
        self._count(row, action.kind)
        if action.kind is Kind.RESIZE:
            row.resizes += 1
        row.last_workers = len(devices)
        row.last_devices = [(d.node, d.index) for d in devices]
        row.state, row.state_since = State.RUNNING, now
        row.workers = len(devices)
        row.devices = [(d.node, d.index) for d in devices]
        if row.started_at is None:
            row.started_at = now
            self.telemetry.queue_wait.observe(max(now - row.submitted_at, 0.0))
        write_control(job_dir, Control(row.generation, Action.RUN))
        # Saved before the processes exist: a crash in between leaves a job that
        # looks launched and is settled by the launch timeout, never a second copy.
        self.store.save(
            row,
            "launched",
            generation=row.generation,
            workers=len(devices),
            devices=row.devices,
            counted=action.kind.value,
            **types_detail(self.cluster, row.devices),
        )
        self._launched[row.id] = now
        self._look_soon = True
        self.executor.launch(
            row.id,
            job_dir,
            row.generation,
            row.spec.command,
            devices,
            # After the spec's env, so the spec's own field is what a worker reads.
            {**row.spec.env, ON_BAD_CHECKPOINT_ENV: row.spec.on_bad_checkpoint},
            max_restarts=max(row.spec.retries - row.attempts, 0),
            workdir=row.spec.workdir,
            uid=uid,
        )
        log.info("launched %s generation %d on %d workers", row.id, row.generation, len(devices))


SIGNALLED = "stop_signalled_at"
"""Key in a row's ``shape``: when its current stop was sent as SIGTERM (absent: by control.json)."""
