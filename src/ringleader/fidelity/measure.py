"""What the real run measured, in the simulator's terms.

From a ``RealRun`` this takes, per job: the mean minibatch time at each worker
count it ran at, with the slowdown of sharing CPU cores taken out (so the
simulator can put back whatever sharing the replay has); its start-up cost
(launch to first minibatch); its restart cost (stop request to the next
generation's first minibatch); and, over the run, the cost of one
suspend-and-resume. Nothing here is assumed that the run did not show,
except the rule of how cores are shared (``ringleader.sim.host``).
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ringleader.fidelity.device import NONE, DeviceTime
from ringleader.fidelity.real import RealJob, RealRun
from ringleader.policy.model.views import Device
from ringleader.sim.host import Host, SharedCores, SharedMachine

WARMUP_STEPS = 2
"""Minibatches of each generation left out of its step times (first-step overheads)."""
IMMEDIATE_S = 1.0
"""A launch this soon after the job's previous generation stopped is that stop's restart."""


@dataclass(frozen=True, slots=True)
class Generation:
    """One launch of a job: its devices and when it computed."""

    job: str
    number: int
    devices: tuple[Device, ...]
    launched_at: float
    steps: tuple[tuple[float, int], ...]
    """(time, world size) of each minibatch it reported, in order."""
    paused: tuple[tuple[float, float], ...]
    """Intervals it sat suspended."""
    stop_requested_at: float | None = None
    stopped_at: float | None = None
    restored_at: float | None = None
    """When the job library had restored the checkpoint and was about to compute."""
    epochs: tuple[float, ...] = ()
    """The epoch each of ``steps`` reported reaching."""
    shares: tuple[float, ...] = ()
    """The examples per GPU each of ``steps`` took (its ``batch_per_worker``)."""

    @property
    def first_step_at(self) -> float | None:
        return self.steps[0][0] if self.steps else None

    def computing(self, t: float) -> bool:
        """Whether its workers load their cores at ``t``: from launch (start-up
        takes CPU too, and the simulator counts a launched worker at once) to the
        last minibatch, less the time it sat suspended."""
        if not self.steps or not self.launched_at <= t <= self.steps[-1][0]:
            return False
        return not any(a <= t < b for a, b in self.paused)

    def ready_after(self) -> float:
        """Launch to ready for its first minibatch: from the first minibatch's end
        less its length, or, for a generation stopped before it computed one
        (resized during a slow start), from the job library's restored time,
        or, stopped before even that, from its stop."""
        if self.first_step_at is not None:
            return max(0.0, self.first_step_at - self.launched_at - self.first_step_s())
        if self.restored_at is not None:
            return max(0.0, self.restored_at - self.launched_at)
        if self.stopped_at is not None:
            # Stopped before it was even ready (still meeting its peers): all of its
            # life was start-up, and at least that long is what a start takes.
            return max(0.0, self.stopped_at - self.launched_at)
        return 0.0

    def first_step_s(self) -> float:
        """About how long the first minibatch took: the gap to the second (same load)."""
        return self.steps[1][0] - self.steps[0][0] if len(self.steps) > 1 else 0.0


@dataclass(frozen=True, slots=True)
class JobMeasure:
    name: str
    step_times: dict[int, float]
    """Mean seconds per minibatch at each worker count, on cores of its own."""
    examples_per_epoch: int
    batch_per_worker: int
    grad_bytes: float
    startup_s: float
    restart_s: float | None
    restarts: int
    epoch_seconds: dict[int, float] = field(default_factory=dict)
    """Seconds per epoch of reported progress at each worker count, on cores of its
    own: what a job whose batch adapts is replayed by (its steps differ in worth)."""
    end_s: float = 0.0
    """From its last minibatch to its end as the server saw it: the final checkpoint,
    the workers' exit, the server's look."""
    samples: tuple[tuple[int, float, float], ...] = ()
    """``(workers, mean seconds per minibatch on cores of its own, examples per GPU)`` at
    each size and share it ran: what a job whose batch adapts is timed by."""
    reports: tuple[tuple[float, float, float], ...] = ()
    """``(epoch, grad_sqr, grad_var)`` as it reported its gradient while it trained."""


@dataclass(frozen=True, slots=True)
class Measured:
    jobs: dict[str, JobMeasure]
    switch_s: float | None
    """One suspend plus one resume, averaged over the run; None: nothing was suspended."""
    restart_s: float | None
    """Every job's restarts averaged: for a job that never restarted."""
    host: Host
    notes: list[str] = field(default_factory=list)


def generations(job: RealJob) -> list[Generation]:
    """The job's launches, from its events (devices, stops) and progress (minibatches)."""
    launches = {int(e["generation"]): e for e in job.events if e["kind"] == "launched"}
    requested = {int(e["generation"]): e["t"] for e in job.events if e["kind"] == "stop_requested"}
    stopped = {
        int(e["generation"]): e["t"]
        for e in job.events
        if e["kind"] == "stopped" and "generation" in e
    }
    steps: dict[int, list[tuple[float, int, float, float]]] = {}
    paused: dict[int, list[tuple[float, float]]] = {}
    since: dict[int, float] = {}
    restored: dict[int, float] = {}
    for rec in job.progress:
        g, t = rec.get("g"), rec.get("t")
        if not isinstance(g, int):
            continue
        if rec.get("event") == "started" and isinstance(rec.get("t_restored"), (int, float)):
            restored[g] = float(rec["t_restored"])  # the start record has no "t"
        if not isinstance(t, (int, float)):
            continue
        event = rec.get("event")
        if event is None and "step" in rec:
            world, epoch = int(rec.get("world_size", 1)), float(rec.get("epoch", 0.0))
            share = float(rec.get("batch_per_worker", 0.0))
            steps.setdefault(g, []).append((float(t), world, epoch, share))
        elif event == "suspended":
            since[g] = float(t)
        elif event == "resumed" and g in since:
            paused.setdefault(g, []).append((since.pop(g), float(t)))
    for g, t in since.items():  # suspended until it ended
        paused.setdefault(g, []).append((t, math.inf))
    out = []
    for g, event in sorted(launches.items()):
        devices = tuple(Device(str(n), int(i)) for n, i in event["devices"])
        ordered = sorted(steps.get(g, []))
        out.append(
            Generation(
                job.name,
                g,
                devices,
                float(event["t"]),
                tuple((t, w) for t, w, _, _ in ordered),
                tuple(paused.get(g, [])),
                requested.get(g),
                stopped.get(g),
                restored.get(g),
                tuple(e for _, _, e, _ in ordered),
                tuple(b for _, _, _, b in ordered),
            )
        )
    return out


class _Load:
    """How many workers compute on each shared resource at a moment of the real run."""

    def __init__(self, gens: Iterable[Generation], host: Host) -> None:
        self.gens = list(gens)
        self.host = host

    def factor(self, gen: Generation, t: float) -> float:
        """The speed sharing allowed ``gen`` at ``t``, as ``host`` models it."""
        load: dict[Hashable, int] = {}
        for other in self.gens:
            if other is gen or other.computing(t):
                for d in other.devices:
                    key = self.host.resource(d)
                    load[key] = load.get(key, 0) + 1
        return min(self.host.speed(load[self.host.resource(d)]) for d in gen.devices)


def measure(run: RealRun, device: Mapping[str, DeviceTime] | None = None) -> Measured:
    """``run`` in the simulator's terms; ``device``: each job's device time, which the
    sharing of cores is not taken out of (``fidelity.device``; none where not named)."""
    host: Host = SharedCores(run.devices, run.cores)
    notes: list[str] = []
    if run.executor != "local":  # the lab's nodes: namespaces of this host, workers unpinned
        host = SharedMachine(_workers_cores(run, notes))
    per_job = {j.name: generations(j) for j in run.jobs}
    load = _Load((g for gens in per_job.values() for g in gens), host)
    jobs: dict[str, JobMeasure] = {}
    for job in run.jobs:
        gens = per_job[job.name]
        if job.state != "succeeded" or not any(g.steps for g in gens):
            notes.append(f"{job.name}: {job.state}, left out of the replay")
            continue
        jobs[job.name] = _job(job, gens, load, (device or {}).get(job.name, NONE))
    restarts = [
        s for j in jobs.values() if j.restart_s is not None for s in [j.restart_s] * j.restarts
    ]
    switches = [s for j in run.jobs for s in _switches(j, per_job[j.name])]
    return Measured(
        jobs,
        statistics.fmean(switches) if switches else None,
        statistics.fmean(restarts) if restarts else None,
        host,
        notes,
    )


def _workers_cores(run: RealRun, notes: list[str]) -> float:
    """The cores the workers had on an unpinned machine: all of them, less what the
    machine's other processes (daemons, server, clients) kept busy over the run,
    leaving the workers at least one."""
    cores = float(len(run.cores))
    if run.machine is None:
        return cores
    background = min(run.machine.background_cores, cores - 1.0)
    notes.append(
        f"the machine's other processes kept {background:.2f} of its {len(run.cores)} cores "
        f"busy ({run.machine.busy_cpu_s:.0f} CPU-s in all, the workers "
        f"{run.machine.worker_cpu_s:.0f}, over {run.machine.wall_s:.0f} s); "
        "the replay's workers share the rest"
    )
    return cores - background


def _intervals(
    gens: list[Generation],
    load: _Load,
    *,
    warmup: int = WARMUP_STEPS,
    whole: bool = True,
    device: DeviceTime = NONE,
) -> list[tuple[int, float, float, float]]:
    """(world size, seconds on cores of its own, epochs of progress, examples per GPU)
    of each minibatch after each generation's first ``warmup``; with ``whole``, one a
    suspension fell in is left out (not a minibatch's time). Its ``device`` time is
    left as it was: sharing cores did not slow it."""
    out = []
    for gen in gens:
        n = len(gen.steps)
        marks = list(zip(gen.steps, gen.epochs or [0.0] * n, gen.shares or [0.0] * n, strict=True))
        for ((a, _), e0, _), ((b, world), e1, share) in itertools.pairwise(marks[warmup:]):
            if whole and any(p < b and a < q for p, q in gen.paused):
                continue
            spent, idle = b - a, min(device.seconds(share), b - a)
            own = idle + (spent - idle) * load.factor(gen, (a + b) / 2)
            out.append((world, own, e1 - e0, share))
    return out


def _samples(timed: list[tuple[int, float, float, float]]) -> tuple[tuple[int, float, float], ...]:
    """``(workers, mean seconds, examples per GPU)`` at each size and share measured."""
    spent: dict[tuple[int, float], list[float]] = {}
    for world, seconds, _, share in timed:
        if share > 0:
            spent.setdefault((world, share), []).append(seconds)
    return tuple((w, statistics.fmean(ts), b) for (w, b), ts in sorted(spent.items()))


def _reports(progress: list[dict[str, Any]]) -> tuple[tuple[float, float, float], ...]:
    """``(epoch, grad_sqr, grad_var)`` of each minibatch that reported its gradient."""
    out = []
    for rec in progress:
        epoch, sqr, var = rec.get("epoch"), rec.get("grad_sqr"), rec.get("grad_var")
        if (
            isinstance(epoch, (int, float))
            and isinstance(sqr, (int, float))
            and isinstance(var, (int, float))
        ):
            out.append((float(epoch), float(sqr), float(var)))
    return tuple(sorted(out))


def _epoch_seconds(timed: list[tuple[int, float, float, float]]) -> dict[int, float]:
    """Seconds per epoch of progress at each worker count, over the minibatches that
    made some."""
    seconds: dict[int, float] = {}
    progress: dict[int, float] = {}
    for world, spent, made, _ in timed:
        if made > 0:
            seconds[world] = seconds.get(world, 0.0) + spent
            progress[world] = progress.get(world, 0.0) + made
    return {w: seconds[w] / progress[w] for w in seconds}


def _job(job: RealJob, gens: list[Generation], load: _Load, device: DeviceTime) -> JobMeasure:
    timed = _intervals(gens, load, device=device)
    base: dict[int, list[float]] = {}
    for world, spent, _, _ in timed:
        base.setdefault(world, []).append(spent)
    if not base:  # too short to leave warm-up out: use what there is
        for world, spent, _, _ in _intervals(gens, load, warmup=0, whole=False, device=device):
            base.setdefault(world, []).append(spent)
    step_times = {w: statistics.fmean(ts) for w, ts in base.items() if ts}
    if not step_times:
        gen = next(g for g in gens if g.steps)
        step_times = {gen.steps[0][1]: gen.steps[0][0] - gen.launched_at}
    shape = _shape(job.progress)
    startup = gens[0].ready_after()
    costs = []
    for before, gen in itertools.pairwise(gens):
        if gen.first_step_at is None:
            continue
        began = gen.launched_at
        if (
            before.stop_requested_at is not None
            and before.stopped_at is not None
            and gen.launched_at - before.stopped_at < IMMEDIATE_S
        ):
            began = before.stop_requested_at  # a resize or migration: the stop is part of it
        costs.append(max(0.0, gen.first_step_at - began - gen.first_step_s()))
    return JobMeasure(
        job.name,
        step_times,
        int(shape.get("examples_per_epoch", 1)),
        int(shape.get("batch_per_worker", 1)),
        float(shape.get("grad_bytes", 1e7)),
        startup,
        statistics.fmean(costs) if costs else None,
        len(costs),
        _epoch_seconds(timed),
        _end_s(job, gens),
        _samples(timed),
        _reports(job.progress),
    )


def _end_s(job: RealJob, gens: list[Generation]) -> float:
    """Seconds from the job's last minibatch to its end."""
    last = max((g.steps[-1][0] for g in gens if g.steps), default=None)
    if last is None or job.finished_at is None:
        return 0.0
    return max(0.0, job.finished_at - last)


def _shape(progress: list[dict[str, Any]]) -> dict[str, float]:
    for rec in progress:
        if "examples_per_epoch" in rec and "batch_per_worker" in rec:
            return {
                k: float(rec[k])
                for k in ("examples_per_epoch", "batch_per_worker", "grad_bytes")
                if k in rec
            }
    return {}


def _switches(job: RealJob, gens: list[Generation]) -> list[float]:
    """Each suspend's latency plus the following resume's, to the next minibatch."""
    requested = sorted(
        (e["t"], e["kind"])
        for e in job.events
        if e["kind"] in ("suspend_requested", "resume_requested")
    )
    out = []
    for gen in gens:
        for began, ended in gen.paused:
            if math.isinf(ended):
                continue
            asked = [t for t, k in requested if k == "suspend_requested" and t <= began]
            resumed = [t for t, k in requested if k == "resume_requested" and t <= ended]
            after = [t for t, _ in gen.steps if t > ended]
            if not asked or not resumed or not after:
                continue
            suspend = began - asked[-1]
            resume = after[0] - resumed[-1] - gen.first_step_s()
            out.append(max(0.0, suspend) + max(0.0, resume))
    return out
