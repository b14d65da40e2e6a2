"""The controller's observing half: each look at a live job, and what it finds.

Each tick the controller looks at every unfinished job: it counts the GPU
time a running gang held, folds in what the job reported, keeps its logs
within their cap, and checks its workers. A gang that lost a node, failed,
was stopped or ended is settled (``settling``); ranks that never started are
relaunched; ranks that linger once the work is done are ended (``lingering``).

A base of ``Controller``: it reads the controller's store, executor, config
and gang records, and raises its ``_need_decision`` and ``_look_soon``.
"""

from __future__ import annotations

import logging
from pathlib import Path

from ringleader.job.control import PROGRESS, last_event
from ringleader.policy.model.views import ClusterView
from ringleader.runtime.control import lingering, stalls
from ringleader.runtime.control.acting import SIGNALLED, Acting
from ringleader.runtime.control.config import ControllerConfig
from ringleader.runtime.control.gangs import Gang, Gangs
from ringleader.runtime.control.progress import ProgressIngest
from ringleader.runtime.control.reach import Reach
from ringleader.runtime.control.settling import Settling
from ringleader.runtime.state.rows import JobRow, State
from ringleader.runtime.state.store import Store
from ringleader.runtime.workers.bounded import cap_log
from ringleader.runtime.workers.executor.base import Executor, ExecutorUnavailable, GangStatus
from ringleader.runtime.workers.gpus import EFFECTIVE, effective_weight, gang_type

log = logging.getLogger("ringleader.controller")

LOG_CHECK_S = 5.0
"""How often a running job's logs are checked against their cap."""
FREEZE_AFTER_S = 1.5
"""How long a gang stays suspended before its executor is told (``Executor.freeze``)."""


class Observing:
    """Looking at each live job: the half of ``Controller`` that watches its gangs."""

    store: Store
    executor: Executor
    config: ControllerConfig
    cluster: ClusterView
    gangs: Gangs
    progress: ProgressIngest
    acting: Acting
    settling: Settling
    _broken: dict[str, str]
    _partners: dict[str, tuple[str, ...]]
    _need_decision: bool
    reach: Reach
    _look_soon: bool

    def job_dir(self, job_id: str) -> Path:
        """Where a job's control file, progress, logs and checkpoints live."""
        return self.config.job_dir(job_id)

    def _observe_one(self, row: JobRow, now: float) -> bool:
        """Observe one job; its own trouble (an unreadable file) never stops the others.

        False if it had trouble.
        """
        try:
            self._observe(row, now)
        except ExecutorUnavailable as err:
            self.reach.lost(err, now)  # no word on any job: the tick ends here
            return False
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
        gang = self.gangs.of(row.id)
        self._count_held(row, gang, now)
        self._ingest(row)
        if self._to_freeze(row, gang, now):
            self.executor.freeze(self.job_dir(row.id), row.generation)  # its GPUs are free
            gang.frozen = True
        if now - gang.logs_checked >= LOG_CHECK_S:
            self._check_files(row, gang, now)
        if row.cancel_requested and row.stopping != "cancel":
            self.acting.request_stop(row, "cancel", now)
        status = self.executor.status(self.job_dir(row.id), row.generation, row.workers)
        seen = self.progress.steps_seen(row.id, row.generation)
        if not status.finished and stalls.stalled(
            row, gang, seen, now, self.config.launch_timeout_s
        ):
            repeated = stalls.again(row)
            log.warning(stalls.warning(row, repeated))
            row.stopping = stalls.STALLED  # saved first: a crash leaves it known as stopping
            self.store.save(row, "stop_requested", reason=row.stopping, generation=row.generation)
            self.executor.kill(self.job_dir(row.id), row.generation)
            gang.stop_killed, gang.stall_charged = True, repeated
            return  # settled once the kill has taken: no rank outlives its job's end
        if not self._stopped(row, gang, status, now):
            self._exited(row, gang, status, now)

    def _to_freeze(self, row: JobRow, gang: Gang, now: float) -> bool:
        """Whether a suspended gang is now to be suspended by its executor too: once
        its ranks said so, and ``FREEZE_AFTER_S`` into its pause. Slurm's suspend
        takes two seconds (SIGTSTP, a pause, SIGSTOP) and holds back a resume
        sent meanwhile, so a turn handed straight back is never frozen."""
        return (
            row.state is State.SUSPENDED
            and not gang.frozen
            and row.stopping is None
            and row.id in self.progress.suspended
            and now - row.state_since >= FREEZE_AFTER_S
        )

    def _count_held(self, row: JobRow, gang: Gang, now: float) -> None:
        """Add the GPU-seconds held since the last look (weighted by speed on a mixed cluster)."""
        since = now if gang.held_since is None else gang.held_since
        if row.state is State.RUNNING:
            held_s = row.workers * max(0.0, now - since)
            row.attained_gpu_s += held_s
            if self.cluster.heterogeneous:
                weight = effective_weight(self.cluster, row.devices, row.type_observations)
                row.shape[EFFECTIVE] = row.shape.get(EFFECTIVE, 0.0) + held_s * weight
        gang.held_since = now

    def _check_files(self, row: JobRow, gang: Gang, now: float) -> None:
        """Every ``LOG_CHECK_S``: whether the job said it is done, and its logs within cap."""
        gang.logs_checked = now
        said = last_event(self.job_dir(row.id) / PROGRESS, row.generation, ("done",))
        gang.said_done = said == "done"
        for path in (self.job_dir(row.id) / "logs").glob("rank*.log"):
            if cap_log(path, self.config.log_cap_bytes):
                log.info(
                    "job %s: %s rotated (cap %d bytes)",
                    row.id,
                    path.name,
                    self.config.log_cap_bytes,
                )

    def _stopped(self, row: JobRow, gang: Gang, status: GangStatus, now: float) -> bool:
        """A gang that lost a node, failed, was signalled or asked to stop: handled, and
        True if that was all there is to do at this look."""
        if status.lost:
            if not gang.failure_killed:
                log.warning("job %s: %d workers lost with their node", row.id, status.lost)
            self.executor.kill(self.job_dir(row.id), row.generation)
            if row.stopping is None and not gang.failure_killed:
                row.stopping = "node_lost"
            self._settle(row, failed=gang.failure_killed, codes=dict(status.exits), now=now)
            return True
        signalled = SIGNALLED in row.shape
        if signalled and row.stopping and not status.finished:
            self.acting.terminate(row)
        if status.failed and not status.finished and not signalled:
            # After a SIGTERM, one rank's end is no failure: the others may
            # still be writing their checkpoint, so they get their grace.
            log.warning("job %s: a worker failed, stopping the rest", row.id)
            self.executor.kill(self.job_dir(row.id), row.generation)
            gang.failure_killed = True
            return True
        if row.stopping and not gang.stop_killed:
            if gang.stop_sent is None:
                gang.stop_sent = now  # asked by a controller before this one
            if now - gang.stop_sent > row.spec.stop_grace_s:
                log.warning("job %s: no clean stop in time, killing it", row.id)
                self.executor.kill(self.job_dir(row.id), row.generation)
                gang.stop_killed = True
                return True  # settled at the next look, once the kill has taken
        if gang.stop_killed:
            # Our kill, after a stop we asked for or a stall: the job lost at most
            # its work since the last checkpoint, its own fault only if it stalled again.
            if status.finished:
                failed = gang.stall_charged
                self._settle(row, failed=failed, codes=dict(status.exits), now=now)
            return True
        if gang.linger is not None and gang.linger.ended:
            if status.finished:  # our kill has taken
                self._need_decision = True
                self.executor.kill(self.job_dir(row.id), row.generation)
                self.settling.lingered(row, gang.linger.ended, self.config.exit_grace_s, now)
            return True
        if signalled and status.finished:
            # Asked to stop by signal: however each rank ended, the job was stopped.
            self._settle(row, failed=False, codes=dict(status.exits), now=now)
            return True
        return False

    def _exited(self, row: JobRow, gang: Gang, status: GangStatus, now: float) -> None:
        """Ranks still starting, still running, or all ended: the gang settled once ended."""
        if status.starting:
            self._look_soon = True  # the exit watch learns a rank's pid at a look
            # Ranks that never said they started: not placed yet (a Ray cluster
            # shared with other work) or lost on the way (a launcher that died).
            # The others would wait in the rendezvous for ever, so give up and
            # relaunch; it is the job's failure only if a rank failed.
            if gang.partial_since is None:
                gang.partial_since = now
            limit, reason = self.config.launch_timeout_s, "placement_timeout"
            adopted_s = self.executor.adopted_start_s
            if gang.launched is None and adopted_s is not None:
                # An earlier controller launched it and died, maybe before the launch.
                limit, reason = min(limit, adopted_s), "launch_lost"
            if now - gang.partial_since > limit:
                log.warning("job %s: %d ranks never started; relaunching", row.id, status.starting)
                gang.partial_since = None
                self.executor.kill(self.job_dir(row.id), row.generation)
                failed = any(code != 0 for code in status.exits.values())
                if row.stopping is None and not failed:
                    row.stopping = reason
                self._settle(row, failed=failed, codes=dict(status.exits), now=now)
            return
        gang.partial_since = None
        if not status.finished:
            gang.launched = None
            if row.stopping is None:
                self._linger(row, status, now)
            return
        if gang.launched is None:
            gang.launched = now
        if not status.exits and now - gang.launched < self.config.launch_timeout_s:
            return  # launched, not yet started
        self._settle(row, failed=status.failed, codes=dict(status.exits), now=now)

    def _linger(self, row: JobRow, status: GangStatus, now: float) -> None:
        """End the ranks that stay, idle, once the job's work is done (``control.lingering``)."""
        gang = self.gangs.of(row.id)
        if not lingering.work_done(status, gang.said_done):
            gang.linger = None
            return
        job_dir = self.job_dir(row.id)
        if gang.linger is None:
            gang.linger = lingering.Linger(now, self.executor.cpu_s(job_dir, row.generation))
            return
        if now - gang.linger.since < self.config.exit_grace_s:
            return
        cpu_now = self.executor.cpu_s(job_dir, row.generation)
        ended = lingering.idle_ranks(gang.linger, status, cpu_now, now)
        if ended is None:  # still computing: a last evaluation, a save; look again later
            gang.linger = lingering.Linger(now, cpu_now)
            return
        log.warning("job %s: %s", row.id, lingering.warning(ended, self.config.exit_grace_s))
        self.executor.kill(job_dir, row.generation)
        gang.linger.ended = ended

    def _ingest(self, row: JobRow) -> None:
        partners = self._partners.get(row.id, ()) if row.state is State.RUNNING else ()
        gpu_type = gang_type(self.cluster, row.devices)
        self.progress.ingest(row, self.job_dir(row.id) / PROGRESS, partners, gpu_type)
        self.store.save_progress(row)

    def _settle(self, row: JobRow, *, failed: bool, codes: dict[int, int], now: float) -> None:
        self._need_decision = True  # before settling: a settle that raised still counts
        # What a rank left in its process group (a background child) ends with the gang.
        self.executor.kill(self.job_dir(row.id), row.generation)
        self.settling.settle(row, failed=failed, codes=codes, now=now)
