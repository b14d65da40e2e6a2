"""The controller's acting half: the spine's actions for a Plan, carried out on processes.

``Acting.apply`` takes the latest Plan and the jobs as stored and has
``spine.effects.carry_out`` take each job to its place, through this body's
effects (``Carrying``):

* ``Stop`` (resize, migrate, rebatch, preempt, cancel): a job that uses the job
  library is asked to checkpoint and stop at its next minibatch boundary;
  any other command gets SIGTERM at once, as under torchrun or Slurm. The
  controller kills it (SIGKILL to its process groups) ``stop_grace_s`` later;
* ``Suspend`` (time-slicing): the job is asked to suspend at its next
  boundary: it frees the device and waits in host memory. A command without
  the library cannot suspend, so its turn ends with a stop instead;
* ``Launch`` and ``Resume`` wait until the job's GPUs are free — a GPU is free
  when nothing runs on it that the plan does not also run there (packing) —
  so two generations of a job never run at once and no GPU is given twice.

The observing half (``control.controller``) asks for stops too (a cancel) and
settles what exits; both share each gang's clocks (``control.gangs``).
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ringleader.job.batching import BATCH_ENV
from ringleader.job.checkpoint import ON_BAD_CHECKPOINT_ENV
from ringleader.job.control import Action, Control, write_control
from ringleader.job.divergence import ON_NON_FINITE_ENV
from ringleader.net.tc import NetCommandError
from ringleader.policy.model.plan import Assignment, Plan
from ringleader.policy.model.views import ClusterView, Device
from ringleader.runtime.control.batching import launch_batch
from ringleader.runtime.control.gangs import Gangs
from ringleader.runtime.control.progress import LIBRARY_GENERATION, STOP_ASKED, STOP_GENERATION
from ringleader.runtime.control.rowview import held
from ringleader.runtime.control.telemetry import Telemetry
from ringleader.runtime.control.traffic import TrafficControl, merged_ranks
from ringleader.runtime.state.errors import disk_full
from ringleader.runtime.state.rows import JobRow, State
from ringleader.runtime.state.store import Store
from ringleader.runtime.workers.executor.base import Executor
from ringleader.runtime.workers.gpus import types_detail
from ringleader.spine import reasons
from ringleader.spine.actions import Kind, Why
from ringleader.spine.effects import carry_out
from ringleader.spine.kin import KinBook

if TYPE_CHECKING:
    from ringleader.runtime.control.config import ControllerConfig

log = logging.getLogger("ringleader.controller")

UNAWARE_AFTER_S = 20.0
"""A generation silent this long after its launch does not use the job library."""
SIGNALLED = "stop_signalled_at"
"""Key in a row's ``shape``: when its current stop was sent as SIGTERM (absent: by control.json)."""


@dataclass(slots=True)
class Acting:
    """Turns the spine's actions into control files, signals and launches."""

    store: Store
    executor: Executor
    config: ControllerConfig
    gangs: Gangs
    telemetry: Telemetry
    suspended: set[str]
    """Jobs whose ranks have said they are suspended (``ProgressIngest.suspended``)."""
    no_room: set[str]
    """Jobs whose last action a full disk stopped (logged once, until it goes ahead)."""
    launched: bool = False
    """A gang was launched (or its launch begun) since the loop last cleared this: the
    loop looks again soon, so the exit watch holds its ranks' pids."""
    kin: KinBook | None = None
    """What each model's jobs measured (``spine.kin``): a launch's batch is chosen from
    its job's step times and its kin's."""
    rebatch: dict[str, int] = field(default_factory=dict)
    """The last decision's jobs to relaunch where they run for a better batch
    (``spine.batching.rebatched``), each with the generation it was judged on: done once."""

    def apply(
        self,
        now: float,
        rows: Sequence[JobRow],
        plan: Plan,
        targets: dict[str, Assignment],
        cluster: ClusterView,
        why: dict[str, reasons.Reason],
    ) -> bool:
        """Carry out the spine's actions for ``plan``, as far as the GPUs allow.

        Stops and suspends are asked for at once. A launch or a resume waits
        until its GPUs are free, and a job being stopped is left alone until
        its old generation has exited (then it is queued and diffed again).
        ``why`` (each job's reason) learns of jobs a full disk holds up. True while
        a job waits for another to leave its GPU: the loop then ticks fast.
        """
        carrying = Carrying(self, now, rows, plan, cluster, self.blocked(rows, targets))
        for row in rows:
            if row.cancel_requested or row.stopping:
                continue
            if row.state not in (State.QUEUED, State.RUNNING, State.SUSPENDED):
                continue
            before = (row.state, row.generation, row.stopping)
            try:
                again = self.rebatch.get(row.id) == row.generation
                carry_out(row, row.id, held(row), plan, carrying, again)
            except (OSError, sqlite3.Error) as err:
                if not disk_full(err):
                    raise
                self._wait_for_room(row, err, why)
            else:
                if row.id in self.no_room and (row.state, row.generation, row.stopping) != before:
                    self.no_room.discard(row.id)  # what the full disk stopped has been done
                    why.pop(row.id, None)  # the next decision says any other
                    log.info("job %s: the disk has room again", row.id)
        return carrying.switching

    def blocked(
        self, rows: Sequence[JobRow], targets: dict[str, Assignment]
    ) -> dict[tuple[str, int], set[str]]:
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
            target = targets.get(r.id)
            keeps_running = (
                r.state is State.RUNNING
                and target is not None
                and target.running
                and {(d.node, d.index) for d in target.active_devices} == set(map(tuple, r.devices))
            )
            settled_suspend = r.state is State.SUSPENDED and r.id in self.suspended
            if r.stopping or not (keeps_running or settled_suspend):
                for n, i in r.devices:
                    blocked.setdefault((n, i), set()).add(r.id)
        return blocked

    def suspend(self, row: JobRow, now: float) -> None:
        uses = self.uses_library(row, now)
        if uses is None:
            return  # not known yet: asked again at the next tick, once it is
        if not uses:
            # It would never answer a suspend: its turn ends the torchrun way,
            # SIGTERM and a later relaunch from its own checkpoint.
            self.request_stop(row, "suspend", now)
            return
        log.info("suspending %s", row.id)
        self._count(row, Kind.SUSPEND)
        asked = time.time()
        write_control(self.config.job_dir(row.id), Control(row.generation, Action.SUSPEND))
        row.state, row.state_since = State.SUSPENDED, now
        self.store.save_request(row, "suspend_requested", asked, generation=row.generation)

    def resume(self, row: JobRow, now: float) -> None:
        log.info("resuming %s", row.id)
        self._count(row, Kind.RESUME)
        asked = time.time()  # the thaw (``scontrol resume`` on Slurm) is part of the resume
        self._thaw(row)
        write_control(self.config.job_dir(row.id), Control(row.generation, Action.RUN))
        row.state, row.state_since = State.RUNNING, now
        self.store.save_request(row, "resume_requested", asked, generation=row.generation)

    def _thaw(self, row: JobRow) -> None:
        """A suspended gang's executor lets it run again (``Executor.thaw``), so it can
        read its control file: always asked, as a restarted server knows no ``frozen``."""
        self.executor.thaw(self.config.job_dir(row.id), row.generation)
        self.gangs.of(row.id).frozen = False

    def request_stop(self, row: JobRow, reason: str, now: float) -> None:
        if row.state is State.SUSPENDED:
            self._thaw(row)  # a frozen rank would take neither control file nor signal
        # Saved before the job can see it: a crash in between must leave a
        # job that is known to be stopping, not one whose exit looks like done.
        row.stopping = reason
        self.gangs.of(row.id).stop_sent = now
        if reason in ("resize", "migrate", "rebatch"):
            # Its restart is timed from here to the next generation's first step.
            row.shape[STOP_ASKED], row.shape[STOP_GENERATION] = now, row.generation
        by_signal = self.uses_library(row, now) is not True
        if by_signal:
            row.shape[SIGNALLED] = now
        self.store.save(
            row, "stop_requested", reason=reason, generation=row.generation, signal=by_signal
        )
        write_control(self.config.job_dir(row.id), Control(row.generation, Action.STOP))
        if by_signal:
            self.terminate(row)

    @staticmethod
    def uses_library(row: JobRow, now: float) -> bool | None:
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

    def terminate(self, row: JobRow) -> None:
        """SIGTERM to each rank once; ranks not started yet get theirs at a later look."""
        done = self.gangs.of(row.id).terminated
        if len(done) < row.workers:
            done |= self.executor.terminate(
                self.config.job_dir(row.id), row.generation, skip=frozenset(done)
            )

    def launch(
        self,
        row: JobRow,
        devices: tuple[Device, ...],
        kind: Kind,
        now: float,
        cluster: ClusterView,
    ) -> None:
        """Start a new generation of ``row`` on ``devices``, counted as ``kind`` (or fail
        it: its owner is gone)."""
        job_dir = self.config.job_dir(row.id)
        uid = None
        if self.config.run_as is not None:
            uid = self.config.run_as(row.spec.user)
            if uid is None:  # the owner was removed: nobody to run it as
                row.state, row.finished_at = State.FAILED, now
                row.error = f"user {row.spec.user!r} no longer exists; the job cannot run"
                self.store.save(row, "failed", reason="owner_removed")
                return
        row.generation += 1
        self._count(row, kind)
        if kind is Kind.RESIZE:
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
        batch = launch_batch(row, len(devices), cluster, self.kin)
        env = {
            **row.spec.env,
            ON_BAD_CHECKPOINT_ENV: row.spec.on_bad_checkpoint,
            ON_NON_FINITE_ENV: row.spec.on_non_finite,
        }
        if batch is not None:
            env[BATCH_ENV] = batch.to_env()
        # Saved before the processes exist: a crash in between leaves a job that
        # looks launched and is settled by the launch timeout, never a second copy.
        self.store.save(
            row,
            "launched",
            generation=row.generation,
            workers=len(devices),
            devices=row.devices,
            counted=kind.value,
            **types_detail(cluster, row.devices),
            **({} if batch is None else {"batch": batch.global_batch(len(devices))}),
        )
        self.gangs.of(row.id).launched = now
        self.launched = True  # before the executor: a launch that fails half-way is looked at too
        self.executor.launch(
            row.id,
            job_dir,
            row.generation,
            row.spec.command,
            devices,
            env,  # the spec's env, then what ringleader says, which a worker reads
            max_restarts=max(row.spec.retries - row.attempts, 0),
            workdir=row.spec.workdir,
            uid=uid,
        )
        log.info("launched %s generation %d on %d workers", row.id, row.generation, len(devices))

    def shape(self, traffic: TrafficControl, plan: Plan, rows: Sequence[JobRow]) -> None:
        """Keep the NIC's filters on the plan's ranks, for the PSes that run now."""
        ranks = merged_ranks(plan.traffic)
        running = {
            r.id: (self.config.job_dir(r.id), r.generation)
            for r in rows
            if r.id in ranks and r.state is State.RUNNING
        }
        try:
            traffic.carry_out(ranks, running)
        except (OSError, NetCommandError):
            log.exception("cannot apply traffic ranks on %s", traffic.agent.device)

    def _count(self, row: JobRow, kind: Kind) -> None:
        """One counted event (``spine.actions.Kind``): on the job's row and in /metrics."""
        row.counts[kind.value] = row.counts.get(kind.value, 0) + 1
        self.telemetry.events.labels(kind.value).inc()

    def _wait_for_room(
        self, row: JobRow, err: OSError | sqlite3.Error, why: dict[str, reasons.Reason]
    ) -> None:
        """A full disk stopped an action on ``row`` (its control file, its record, its
        start): the job stays as it was, saying why, and every other job carries on.

        It is not failed: on a full disk that could not be recorded either (the
        database is there too), and nothing is wrong with the job. The action
        is tried again at each tick and goes ahead once there is room.
        """
        what = err.strerror if isinstance(err, OSError) else str(err)
        text = f"the disk holding {self.config.state_dir} is full ({what}); waiting for room"
        why[row.id] = reasons.Reason(reasons.DISK_FULL, text)
        if row.id not in self.no_room:
            self.no_room.add(row.id)
            log.error("job %s: %s", row.id, text)


class Carrying:
    """The runtime's ``spine.effects.Effects``, for one ``Acting.apply`` at ``now``.

    Stops and suspends are asked for at once; a stop takes time (the job
    checkpoints, then exits), so a stopped job's launch waits for a later diff.
    A launch or a resume waits while another job still holds one of its GPUs
    (``blocked``); ``switching`` then says whether that holder is a suspend
    under way, so the loop looks again very soon.
    """

    stops_at_once = False

    def __init__(
        self,
        acting: Acting,
        now: float,
        rows: Sequence[JobRow],
        plan: Plan,
        cluster: ClusterView,
        blocked: dict[tuple[str, int], set[str]],
    ) -> None:
        self.acting = acting
        self.now = now
        self.rows = rows
        self.plan = plan
        self.cluster = cluster
        self.blocked = blocked
        self.switching = False

    def launch(self, job: JobRow, devices: tuple[Device, ...], kind: Kind) -> None:
        if not self._waits(job):
            self.acting.launch(job, devices, kind, self.now, self.cluster)

    def stop(self, job: JobRow, why: Why) -> None:
        self.acting.request_stop(job, why.value, self.now)

    def suspend(self, job: JobRow) -> None:
        self.acting.suspend(job, self.now)

    def resume(self, job: JobRow) -> None:
        if not self._waits(job):
            self.acting.resume(job, self.now)

    def _waits(self, row: JobRow) -> bool:
        """Whether another job still holds one of the GPUs ``row`` is to run on."""
        wanted = self.plan.of(row.id).active_devices
        if not any(self.blocked.get((d.node, d.index), set()) - {row.id} for d in wanted):
            return False
        # Its GPUs are still being given back: by a stop (seconds) or a suspend (one
        # minibatch, so look again very soon).
        self.switching = self.switching or any(
            r.state is State.SUSPENDED and r.id not in self.acting.suspended for r in self.rows
        )
        return True
