"""The simulated half of a fidelity run: the real run's jobs, replayed with its costs.

Each job arrives when it really arrived, trains the same epochs with the
minibatch times the real run measured at each worker count (a count it never
ran at takes the nearest one it did), pays its own measured start-up and
restart costs and its end (last minibatch to the server seeing it end,
charged with its start), and shares CPU cores the way the local executor pins them.
The policy is the one the server ran, served as the server serves it (a
measured profiling phase where it wants speed models), and sees only what
the simulator observes: nothing of the measurements but their effects.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping

from ringleader.fidelity.adapted import AdaptedProfile, adapted_profile
from ringleader.fidelity.device import DeviceTime
from ringleader.fidelity.measure import JobMeasure, Measured
from ringleader.fidelity.real import RealRun
from ringleader.fidelity.workload import FidelityJob, FidelityWorkload
from ringleader.perf.epochs import EpochsToConverge
from ringleader.perf.errors import ModelFitError
from ringleader.perf.overlap import fit_overlap, overlap_model
from ringleader.perf.speed import SpeedModel
from ringleader.policy.catalog import policy_from_config
from ringleader.policy.model.views import ClusterView, JobShape, Node
from ringleader.runtime.control.config import TICK_S
from ringleader.runtime.workers.gpus import NODE
from ringleader.sim.engine import DEFAULT_SWITCH_DELAY_S, Simulator
from ringleader.sim.profiles import TrueProfile
from ringleader.sim.result import SimResult
from ringleader.sim.submitted import SimJob
from ringleader.spine.batching import BatchBounds
from ringleader.spine.kin import Model, model_of
from ringleader.spine.needs import RUNTIME, serve_policy

ALIGN_S = 3600.0


def replay(run: RealRun, measured: Measured, workload: FidelityWorkload) -> SimResult:
    """Simulate ``run``'s workload under its policy with what ``measured`` found."""
    by_name = {j.name: j for j in workload.jobs}
    # Clock-aligned policy timers (time-slicing quanta) turn over at the same
    # instants as in the real run: the clock is shifted by whole hours only.
    t0 = math.floor(min(j.submitted_at for j in run.jobs) / ALIGN_S) * ALIGN_S
    fallback = measured.restart_s
    per_node = max((g for _, g in run.nodes), default=run.devices)
    kin = _kin_samples(measured, {j.name for j in workload.jobs if j.batch is not None})
    jobs = []
    for real in run.jobs:
        m = measured.jobs.get(real.name)
        if m is None:
            continue
        job = by_name[real.name]
        spec = job.spec()
        restart = m.restart_s if m.restart_s is not None else fallback
        profile, bounds = _truth(m, job, run.devices, per_node, kin)
        jobs.append(
            SimJob(
                id=real.name,
                submitted_at=real.submitted_at - t0,
                profile=profile,
                batch=bounds,
                shape_told=False,  # the server learnt it from the job's first progress line
                max_gpus=spec.highest,
                min_gpus=spec.lowest,
                requested_gpus=spec.gpus,
                elastic=spec.elastic,
                # Its end too: the simulator's one hold of GPUs without progress is a
                # start's, and the end is as long, and on the same GPUs' clock.
                startup_s=m.startup_s + m.end_s,
                restart_s=m.startup_s if restart is None else restart,
            )
        )
    policy = serve_policy(policy_from_config(run.policy, quantum_s=workload.quantum_s), RUNTIME)
    startups = [m.startup_s for m in measured.jobs.values()]
    return Simulator(
        policy,
        ClusterView(tuple(Node(n, g) for n, g in run.nodes) or (Node(NODE, run.devices),)),
        jobs,
        restart_delay_s=fallback if fallback is not None else max(startups, default=0.0),
        round_s=run.round_s,
        switch_delay_s=DEFAULT_SWITCH_DELAY_S if measured.switch_s is None else measured.switch_s,
        host=measured.host,
        # A job handed its batch reports its gradient as it goes, each report an event
        # here; the server decides on none of them, only on its ticks (``sim.ticks``).
        tick_s=TICK_S if any(j.batch is not None for j in jobs) else None,
        rounds_after_decisions=True,
    ).run()


def _profile(m: JobMeasure, epochs: float, devices: int, *, adapts: bool) -> TrueProfile:
    """The job's truth for the simulator: measured step times at every size it may get.

    A job whose batch adapted took steps of another size, and worth, at each
    launch: it is replayed by the progress it made per second at each count,
    told as the step time of its first batch that makes that progress."""
    times = dict(m.step_times)
    if adapts and m.epoch_seconds:
        per_epoch = m.examples_per_epoch / m.batch_per_worker  # steps per epoch, one worker
        times = {w: s * w / per_epoch for w, s in m.epoch_seconds.items()}
    for w in range(1, devices + 1):
        if w not in times:
            nearest = min(times, key=lambda s: (abs(math.log(s / w)), s))
            times[w] = times[nearest]
    shape = _shape(m)
    # Every count it may get has a time now, so no fit is asked beyond them; progress
    # rates need not be a step-time curve NNLS can hold (it may refuse them).
    fitted = None if not adapts else _constant(shape, statistics.fmean(times.values()))
    return TrueProfile(m.name, shape, times, EpochsToConverge.constant(epochs), fitted=fitted)


def _constant(shape: JobShape, seconds: float) -> SpeedModel:
    return SpeedModel(
        (0.0, 0.0, 0.0, 0.0, seconds),
        shape.algorithm,
        shape.grad_bytes,
        shape.batch_per_worker,
        shape.examples_per_epoch,
        rank=1,
    )


def _truth(
    m: JobMeasure,
    job: FidelityJob,
    devices: int,
    per_node: int,
    kin: Mapping[Model, tuple[tuple[int, float, float], ...]],
) -> tuple[TrueProfile, BatchBounds | None]:
    """The job's truth, and the bounds it takes each launch's batch within (None: it
    keeps its own, or what it and its kin measured cannot be fitted)."""
    if job.batch is not None:
        b = job.batch
        bounds = BatchBounds(b.global_min, b.global_max, b.per_gpu_max)
        samples = kin.get(model_of(_shape(m)), ())
        adapted = _adapted(m, job.epochs, samples, bounds, per_node, job.device_time())
        if adapted is not None:
            return adapted, bounds
    return _profile(m, job.epochs, devices, adapts=job.batch is not None), None


def _shape(m: JobMeasure) -> JobShape:
    """The job as its progress described it."""
    return JobShape(m.examples_per_epoch, m.batch_per_worker, m.grad_bytes)


def _kin_samples(
    measured: Measured, adapting: set[str]
) -> dict[Model, tuple[tuple[int, float, float], ...]]:
    """Every size and share each model's jobs that adapt their batch ran at (``spine.kin``)."""
    out: dict[Model, list[tuple[int, float, float]]] = {}
    for name, m in measured.jobs.items():
        if name in adapting:
            out.setdefault(model_of(_shape(m)), []).extend(m.samples)
    return {k: tuple(v) for k, v in out.items()}


def _adapted(
    m: JobMeasure,
    epochs: float,
    samples: tuple[tuple[int, float, float], ...],
    bounds: BatchBounds,
    per_node: int,
    device: DeviceTime,
) -> AdaptedProfile | None:
    """The job replayed by the batch each launch is handed (``fidelity.adapted``); None
    where what it and its kin measured cannot be fitted."""
    try:
        params = fit_overlap(samples, per_node, bounds.per_gpu_max)
    except ModelFitError:
        return None
    shape = _shape(m)
    base = _constant(shape, statistics.fmean(m.step_times.values()))
    timing = overlap_model(base, params, per_node, bounds.per_gpu_max)
    return adapted_profile(m.name, shape, m.step_times, epochs, timing, m.reports, bounds, device)
