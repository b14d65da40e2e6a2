"""The discrete-event simulator: the policy core's plans, played on a virtual clock.

At every event — an arrival, a completion, a round tick, or the time the policy
asked to be woken — the engine builds a snapshot, asks the policy for a Plan,
and carries it out, charging ``restart_delay_s`` of lost time to every job
whose workers or GPUs changed (a checkpoint-stop-restart, SPEC A5). Between
events every running job advances at its true speed, so the next completion
is known exactly and nothing is stepped through that does not change.

Sharing (Gandiva, SPEC C) adds three costs and one effect: resuming a job
time-sliced out on the same GPUs costs ``switch_delay_s``; a job moved to
other GPUs (migration) pays the restart delay when it next runs; jobs packed
on one GPU, and gangs spread over more nodes than they need, run at the
speed a ``Contention`` model gives (measured pairwise throughputs in the
scenarios). Each job reports its minibatch time alone and, separately, while
packed with each partner — the profile introspection judges packings by.

A round tick is skipped where the last decision moved nobody, nothing
arrived or ended since, and its plan is settled (``Plan.settled``: it reads
nothing the clock moves on, so asking again would give it back; Gandiva's
stack while no group takes turns). The tick still divides the time jobs
advance over, so every float is as it was.

The engine makes no scheduling decision of its own: which jobs run, where and
at what size all come from the Plan.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable, Mapping, Sequence

from ringleader.metrics import UsagePoint
from ringleader.policy.model.plan import WAIT, Decider, Plan
from ringleader.policy.model.views import ClusterView
from ringleader.sim.errors import check_quotas, clock_stopped, nothing_fits
from ringleader.sim.events import Cadence, ended, next_event
from ringleader.sim.failures.run import Failures, strike
from ringleader.sim.host import Host
from ringleader.sim.jobs import DONE, JobState, arrived
from ringleader.sim.occupancy import Occupancy
from ringleader.sim.pacing import Contention, Pacing
from ringleader.sim.playing import Handing, Playing
from ringleader.sim.result import RunLog, SimResult
from ringleader.sim.steering import Driver, steer
from ringleader.sim.submitted import SimJob
from ringleader.sim.ticks import Finishes, advance, repace, tick_at_or_after
from ringleader.sim.topology import Topology
from ringleader.spine.effects import carry_out, unchanged
from ringleader.spine.kin import KinBook
from ringleader.spine.needs import SIMULATOR, serve_policy
from ringleader.spine.round import decide_round

# Checkpoint → stop → restart at a new world size, measured on this project's
# 2-core CPU machine with gloo (1 → 2 ranks, ~3.8 s, 2 s of it Python and
# torch start-up). The seed reports "a few seconds" on its GPUs.
DEFAULT_RESTART_DELAY_S = 3.8
DEFAULT_ROUND_S = 600.0
# Suspend (finish the minibatch, free the GPU) plus resume on the same GPU: the seed
# reports 50-250 ms for suspend; we charge 250 ms for the pair (bench/suspend.py).
DEFAULT_SWITCH_DELAY_S = 0.25


MAX_FROZEN_EVENTS = 10_000
"""Events in a row at one instant before a run counts as stalled (a real run has a few):
time that cannot advance (``errors.clock_stopped``) would loop forever."""


class Simulator:
    """Plays ``jobs`` on ``cluster`` under ``policy``; see the module docstring."""

    def __init__(
        self,
        policy: Decider,
        cluster: ClusterView,
        jobs: Sequence[SimJob],
        *,
        restart_delay_s: float = DEFAULT_RESTART_DELAY_S,
        round_s: float | None = DEFAULT_ROUND_S,
        on_finish: Callable[[int, int], None] | None = None,
        switch_delay_s: float = DEFAULT_SWITCH_DELAY_S,
        contention: Contention | None = None,
        until: float | None = None,
        snapshot_at: Sequence[float] = (),
        driver: Driver | None = None,
        host: Host | None = None,
        tick_s: float | None = None,
        quotas: Mapping[str, int] | None = None,
        explain: bool = False,
        failures: Failures | None = None,
        topology: Topology | None = None,
        rounds_after_decisions: bool = False,
    ) -> None:
        if restart_delay_s < 0 or switch_delay_s < 0:
            raise ValueError("restart_delay_s and switch_delay_s must be >= 0")
        if round_s is not None and round_s <= 0:
            raise ValueError(f"round_s must be positive or None, got {round_s}")
        if tick_s is not None and not (0 < tick_s < math.inf):
            raise ValueError(f"tick_s must be positive and finite, or None, got {tick_s}")
        if len({j.id for j in jobs}) != len(jobs):
            raise ValueError("job ids must be unique")
        quotas = dict(quotas or {})
        check_quotas(jobs, quotas)
        self.policy = serve_policy(policy, SIMULATOR)
        self._needs = policy.needs
        self.cluster = cluster
        self.jobs = sorted(jobs, key=lambda j: (j.submitted_at, j.id))
        self.restart_delay_s = restart_delay_s
        self.round_s = round_s
        self.on_finish = on_finish
        """Called with (jobs finished, jobs in all) as jobs complete: for progress bars."""
        self.switch_delay_s = switch_delay_s
        self.contention = contention
        self.until = until
        """Stop the clock here, jobs unfinished or not (their progress is in the result)."""
        self.snapshot_at = sorted(snapshot_at)
        self.driver = driver
        self._jobs_changed = False
        """A job that shared a GPU or host left since the last placement: sharing must be
        worked out again even if the plan moves nobody."""
        self.host = host
        """Shared host resources (the fidelity replay's CPU cores); None: GPUs share nothing."""
        self.tick_s = tick_s
        """Decide once a tick over the events since, as the runtime does (``sim.ticks``);
        None: at every event."""
        idle = tick_s is None and driver is None
        self._cadence = Cadence(round_s, rounds_after_decisions and tick_s is not None, idle)
        self._batched = frozenset(j.id for j in self.jobs if j.batch is not None)
        self._occupancy = Occupancy()
        """The GPUs the jobs run on and hold, as ``_apply`` and completions change them."""
        typed = any(j.type_speed for j in jobs)
        self._pacing = Pacing(cluster, contention, host, typed=typed, topology=topology)
        self.quotas = quotas
        """Each user's GPU quota (``spine.quota``); a user not named has none."""
        self.explain = explain
        """Give each decision's reasons (``spine.reasons``) and count each job's waits by
        them (``SimResult.waits``); off, a decision costs the policy's time alone."""
        self._playing = Playing(restart_delay_s, switch_delay_s)
        self._phased = any(j.profile.phased for j in jobs)
        """Some job's speed moves on at each epoch's end (``ticks.repace``)."""
        self._owner: dict[str, str] = {}
        """Each job's user, where quotas or reasons need it (set as a run starts)."""
        self.failures = failures
        """Outages, and their cost to jobs (``sim.failures``; one run's); None: none."""

    def run(self) -> SimResult:
        """Simulate until every job finished (or ``until``).

        What exists before the run (the workload, memoised speed curves, whatever the
        caller holds) is left out of cyclic collections for its length
        (``gc.freeze``), and so is what each decision leaves behind, frozen as it
        returns: a decision makes no reference cycles (``spine.deciding``), so
        reference counting frees it in time, while the collector would walk it after
        every decision (``docs/scale.md``). All is as it was after the run; a process
        that froze objects itself (a server before it forks) is left alone.
        """
        if gc.get_freeze_count():
            return self._run(freezing=False)
        gc.freeze()
        try:
            return self._run(freezing=True)
        finally:
            gc.unfreeze()

    def _run(self, *, freezing: bool) -> SimResult:
        """The run; ``freezing``: it froze the collector's objects, and so freezes each
        decision's (``run``)."""
        started = time.perf_counter()
        occupancy, pending = self._fresh(), self.jobs
        nxt = frozen = 0
        active: dict[str, JobState] = {}
        now = pending[0].submitted_at if pending else 0.0
        until = math.inf if self.until is None else self.until
        log = RunLog(now, self.snapshot_at, by_user=len({j.user for j in pending}) > 1)
        running: list[JobState] = []  # in ``active``'s order; by placement, less who ended
        gpus: tuple[int, int] | None = None  # busy and held, while no job moves or leaves
        tick = self.tick_s
        due = now if tick is None else tick_at_or_after(now, tick)  # when the next decision is
        since = now  # every running job has advanced to here (ticking, only at decisions)
        finishes = None if tick is None else Finishes([], now)
        plan: Plan | None = None
        still = False  # the last decision moved nobody, and no job arrived or ended since
        quiet = False  # the event was an outage that touched no job and freed none waited for
        while (nxt < len(pending) or active) and now < until:
            while nxt < len(pending) and pending[nxt].submitted_at <= now:
                job = pending[nxt]  # nobody's sharing changes until it is placed (``_apply``)
                active[job.id] = arrived(job, now)
                nxt += 1
                still = quiet = False
            deciding, quiet = self._cadence.decide_now(plan, now, due, still, quiet), False
            if deciding:
                if since < now:
                    advance(running, since, now)
                    since = now
                if self.driver is not None and not steer(self.driver, active, now):
                    break
                plan, rebatch = self._decide(active, now, log, freezing)
                still = True
                if self._apply(plan, active, now, rebatch):
                    running = self._pacing.pace(active, running, occupancy.shared)
                    gpus, still = None, False
                if tick is not None:
                    finishes, due = Finishes(running, now), math.inf
                    self._cadence.decided(now)
            if gpus is None:  # somebody started, stopped, moved or left
                gpus = occupancy.busy, occupancy.held  # as the plan's busy_gpus, held_gpus
            log.note_usage(UsagePoint(now, *gpus, len(active)))
            arrival = pending[nxt].submitted_at if nxt < len(pending) else math.inf
            later = self._next_event(plan, running, arrival, now, finishes, until, due, log, active)
            frozen = frozen + 1 if later <= now else 0
            if frozen > MAX_FROZEN_EVENTS:
                raise clock_stopped(now)
            if finishes is None:
                advance(running, now, later)  # only a running job progresses
                since = later
            now = later
            if log.marks and log.marks[0] <= now:
                if since < now:
                    advance(running, since, now)
                    since, finishes = now, Finishes(running, now)
                log.snapshot(now, active)
            finished, since = ended(running, finishes, now, since)
            if self._phased:
                repace(running)  # a job at an epoch's end: its new speed
            changed = False  # ticking: a job that shared a GPU or host ended
            if finished:
                running, since, changed = self._finished(finished, running, active, log, now, since)
                gpus, still = None, False
            if self.failures is not None and self.failures.next_change() <= now:
                running, since, woken = self._outages(now, active, running, since)
                gpus, changed, still = None, True, still and not woken
                quiet = not (woken or finished)
                due = now if woken and tick is None else due
            if tick is not None:
                assert finishes is not None
                if changed or finishes.since < since:  # new speeds, or moved on: index again
                    finishes = Finishes(running, now)
                if self._cadence.decides_on(plan, now, arrival, bool(finished) or changed):
                    due = min(due, tick_at_or_after(now, tick))
        if since < now:
            advance(running, since, now)
        if self.failures is not None:
            self.failures.close_all(active.values(), now)
        return log.result(self.policy.name, self.cluster.capacity, now, active, started)

    def _fresh(self) -> Occupancy:
        """What a run keeps of its own, made anew: GPUs in use, plays, owners, ``spine.kin``."""
        occupancy = self._occupancy = Occupancy()
        owners = self.quotas or self.explain
        self._owner = {j.id: j.user for j in self.jobs} if owners else {}
        kin = self._kin = KinBook()
        cluster, handing = self.cluster, None
        if any(j.batch is not None for j in self.jobs):
            needs, restart = self._needs, self.restart_delay_s
            handing = Handing(cluster.capacity, needs, restart, kin, cluster.widest_node)
        self._playing = Playing(self.restart_delay_s, self.switch_delay_s, handing)
        return occupancy

    def _decide(
        self, active: dict[str, JobState], now: float, log: RunLog, freezing: bool
    ) -> tuple[Plan, frozenset[str]]:
        """One round of the spine's over every active job: its Plan and ``Round.rebatch``."""
        capacity, needs, restart = self.cluster.capacity, self._needs, self.restart_delay_s
        views = [s.view(capacity, needs, restart, self._kin) for s in active.values()]
        explain = self.explain
        decided = decide_round(
            self.policy,
            views,
            self.cluster if self.failures is None else self.failures.cluster,
            now,
            owner=self._owner,
            quotas=self.quotas,
            explain=explain,
            alone=True,
            batched=self._batched,
        )
        plan = decided.plan
        if explain:
            log.explained(now, plan, decided.reasons)
        if freezing:
            gc.freeze()  # what the decision leaves behind (``run``)
        log.decided(now, plan, active, capacity)
        return plan, decided.rebatch

    def _finished(
        self,
        finished: list[JobState],
        running: list[JobState],
        active: dict[str, JobState],
        log: RunLog,
        now: float,
        since: float,
    ) -> tuple[list[JobState], float, bool]:
        """Take the jobs that ended at ``now`` out of the run. Gives the jobs still
        running, the time they have advanced to, and whether one that ended shared a
        GPU or host (ticking, their speeds were worked out again here, not at the
        next tick)."""
        changed = False
        for state in finished:
            del active[state.job.id]
            self._occupancy.remove(state.devices, state.workers, state.suspended)
            if state.partners or self.host is not None:
                self._jobs_changed = changed = True  # who shared with it runs faster now
            state.finished_at = now
            if self.failures is not None:
                self.failures.finished(state, now)
            log.done.append(state)
            if self.on_finish is not None:
                self.on_finish(len(log.done), len(self.jobs))
        running = [s for s in running if s.remaining > DONE]
        if changed and self.tick_s is not None:
            if since < now:
                advance(running, since, now)
                since = now
            running = self._pacing.pace(active, running, self._occupancy.shared)
        return running, since, changed

    def _outages(
        self, now: float, active: dict[str, JobState], running: list[JobState], since: float
    ) -> tuple[list[JobState], float, bool]:
        """The outages due by ``now`` (``failures.run.strike``), running jobs advanced to
        it first: the jobs still running, when they are advanced to, whether to decide."""
        assert self.failures is not None
        if since < now:
            advance(running, since, now)
        struck, woken = strike(self.failures, now, active, self._occupancy)
        if struck:
            self._jobs_changed = True
            running = self._pacing.pace(active, running, self._occupancy.shared)
        return running, now, woken

    def _apply(
        self, plan: Plan, active: dict[str, JobState], now: float, rebatch: frozenset[str]
    ) -> bool:
        """Carry out the spine's actions for ``plan`` (``sim.playing``: time is their effect),
        relaunching the jobs of ``rebatch`` where they run. True when who runs where may
        have changed (a job was placed, stopped or moved, or one that shared a GPU or host
        left): then sharing and speeds are worked out again (``Pacing.pace``). A job that
        ended alone only leaves the running list; one that arrived and waits changes nothing.
        """
        changed = self._jobs_changed
        self._jobs_changed = False
        # ``plan.of`` without a call per job: a dict's look-up compiles to a call into C.
        given = plan.assignments
        assigned = given if isinstance(given, dict) else dict(given)
        playing = self._playing
        playing.now = now
        for state in active.values():
            target = assigned.get(state.job.id, WAIT)
            again = state.job.id in rebatch
            if not again and unchanged(target, state.target):
                continue  # only a carried-out plan moves a simulated job (``spine.effects``)
            changed = True
            was_running = state.running
            held = state.holding
            playing.alive = bool(held.devices)
            carry_out(state, state.job.id, held, plan, playing, again)
            was = (state.devices, state.workers, state.suspended)
            state.carry_out(target, playing.alive)
            self._occupancy.change(was, state.devices, state.workers, state.suspended)
            if state.running != was_running:
                state.state_since = now
            state.moved()
        if changed and self.failures is not None:
            self.failures.settle(now, active.values())  # checkpoints: their cost and rate
        return changed

    def _next_event(
        self,
        plan: Plan | None,
        running: list[JobState],
        arrival: float,
        now: float,
        finishes: Finishes | None,
        until: float,
        due: float,
        log: RunLog,
        active: dict[str, JobState],
    ) -> float:
        """``events.next_event`` with this run's cadence and outages; never none, where
        some job is still to run (``errors.nothing_fits``)."""
        outage = math.inf if self.failures is None else self.failures.next_change()
        round_at, round_s = self._cadence.ahead(now)
        later = next_event(
            plan,
            running,
            min(arrival, outage, round_at),
            now,
            finishes,
            log.marks,
            round_s=round_s,
            tick_s=self.tick_s,
            due=due,
            until=until,
        )
        if math.isinf(later):
            raise nothing_fits(now, active, self.policy.name, self.cluster.capacity)
        return later
