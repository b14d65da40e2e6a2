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

from ringleader.fidelity.measure import JobMeasure, Measured
from ringleader.fidelity.real import RealRun
from ringleader.fidelity.workload import FidelityWorkload
from ringleader.perf.epochs import EpochsToConverge
from ringleader.perf.speed import SpeedModel
from ringleader.policy.catalog import policy_from_config
from ringleader.policy.model.views import ClusterView, JobShape, Node
from ringleader.runtime.workers.gpus import NODE
from ringleader.sim.engine import DEFAULT_SWITCH_DELAY_S, Simulator
from ringleader.sim.jobs import SimJob
from ringleader.sim.profiles import TrueProfile
from ringleader.sim.result import SimResult
from ringleader.spine.needs import RUNTIME, serve_policy

ALIGN_S = 3600.0


def replay(run: RealRun, measured: Measured, workload: FidelityWorkload) -> SimResult:
    """Simulate ``run``'s workload under its policy with what ``measured`` found."""
    specs = {j.name: j.spec() for j in workload.jobs}
    # Clock-aligned policy timers (time-slicing quanta) turn over at the same
    # instants as in the real run: the clock is shifted by whole hours only.
    t0 = math.floor(min(j.submitted_at for j in run.jobs) / ALIGN_S) * ALIGN_S
    fallback = measured.restart_s
    jobs = []
    for real in run.jobs:
        m = measured.jobs.get(real.name)
        if m is None:
            continue
        spec = specs[real.name]
        restart = m.restart_s if m.restart_s is not None else fallback
        jobs.append(
            SimJob(
                id=real.name,
                submitted_at=real.submitted_at - t0,
                profile=_profile(m, spec.epochs, run.devices, adapts=spec.batch is not None),
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
    shape = JobShape(m.examples_per_epoch, m.batch_per_worker, m.grad_bytes)
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
