"""The batch a job that adapts it is handed at each launch, and what a replay makes of it.

One rule chooses it (``spine.batching``) for the runtime's launches and the
simulator's; a simulated job holds it, and what it is worth, until it is
launched again, as the job library does. A replay tells a job's shape only
once it ran, as the runtime learns it.
"""

from __future__ import annotations

import dataclasses
import math

import pytest

from ringleader.fidelity.adapted import AdaptedProfile, adapted_profile
from ringleader.fidelity.device import DeviceTime
from ringleader.job.batching import gain
from ringleader.job.noise import NoiseScale
from ringleader.perf.overlap import overlap_model
from ringleader.perf.speed import SpeedModel
from ringleader.policy.model.needs import Needs
from ringleader.policy.model.plan import Assignment
from ringleader.policy.model.views import Device, JobShape
from ringleader.sim.jobs import JobState, arrived
from ringleader.sim.playing import Handing
from ringleader.sim.submitted import SimJob
from ringleader.spine.batching import BatchBounds, launch_share
from ringleader.spine.kin import KinBook
from ringleader.spine.views import UNREPORTED

BOUNDS = BatchBounds(global_min=32, global_max=2048, per_gpu_max=512)
SQR, VAR = 0.02, 0.4
"""``|G|²`` and the variance at ``global_min``: a noise scale of 640 examples."""
PARAMS = (0.0109, 0.00014, 0.0039, 1e-8, 0.0043, 1.1e-8, 1.0)
"""Pollux's overlap terms, as fitted to examples/goodput.yaml's classifiers."""


def _profile() -> AdaptedProfile:
    shape = JobShape(4096, 8, 1e7)
    base = SpeedModel((0.0, 0.0, 0.0, 0.0, 0.02), shape.algorithm, 1e7, 8, 4096, rank=1)
    timing = overlap_model(base, PARAMS, 4, BOUNDS.per_gpu_max)
    reports = [(0.5 * e, SQR, VAR) for e in range(1, 60)]  # from half an epoch on
    return adapted_profile("a", shape, {1: 0.02}, 30.0, timing, reports, BOUNDS)


def _run(state: JobState, gpus: int, seconds: float) -> None:
    """Carry out ``gpus`` GPUs for ``state`` and let it train ``seconds``."""
    devices = tuple(Device("n0", i) for i in range(gpus))
    state.carry_out(Assignment(devices, gpus), alive=True)
    state.pace()
    state.advance(0.0, seconds)


def test_a_simulated_job_takes_the_batch_it_is_handed_and_holds_it_until_relaunched() -> None:
    job = SimJob("a", 0.0, _profile(), max_gpus=4, batch=BOUNDS)
    state = arrived(job, 0.0)
    handing = Handing(4, Needs(speed_model=True), 0.0, KinBook(), per_node=4)
    handing.hand(state, 4)  # nothing reported yet: global_min, worth one step at it
    first = state.truth
    assert isinstance(first, AdaptedProfile) and (first.share, first.worth) == (8, 1.0)
    _run(state, 4, 10.0)
    assert state.truth is first and state.observations[4].batch_per_worker == 8
    handing.hand(state, 2)  # timed at one size: each GPU keeps the share it had, or more
    assert state.truth.shape.batch_per_worker == 16
    _run(state, 2, 10.0)
    view = state.view(4, Needs(speed_model=True), 0.0, KinBook())
    expected = launch_share(view, 3, BOUNDS, 4)
    handing.hand(state, 3)  # two sizes: the share with the most goodput, as the runtime's
    held = state.truth
    assert isinstance(held, AdaptedProfile)
    assert held.share == expected[0] * expected[1] > math.ceil(32 / 3)
    assert held.worth > 1.0
    _run(state, 3, 5.0)
    assert state.truth is held  # the statistics moved on; the launch's batch did not


def test_a_launch_is_worth_what_the_job_library_counts_each_of_its_steps_as() -> None:
    profile = _profile()
    scale = NoiseScale()
    trace = VAR * BOUNDS.global_min  # the job reports the variance at global_min
    scale.observe(SQR + trace / 16, SQR + trace / 64, 16, 64)
    launched = profile.launched(3, 200, 1, 0.5)
    assert isinstance(launched, AdaptedProfile)
    assert launched.worth == pytest.approx(gain(scale, 600, BOUNDS.global_min))
    steps = 30 * 4096 / (launched.worth * BOUNDS.global_min)
    step = launched.timing.step_time(3, 200.0) if launched.timing else 0.0
    assert launched.seconds_on((3,), 0.6) == pytest.approx(steps * step)
    early = profile.launched(3, 200, 1, 0.0)
    assert isinstance(early, AdaptedProfile) and early.worth == 1.0  # before its first report


def test_a_replayed_stand_in_gpu_is_not_slowed_by_the_cores_its_workers_share() -> None:
    device = DeviceTime(0.01, 0.0001, BOUNDS.per_gpu_max)
    profile = dataclasses.replace(_profile(), device=device).launched(3, 100, 1, 0.5)
    step, sleep = profile.step_time_on((3,), 0.5), device.seconds(100)
    assert step > sleep == pytest.approx(0.02)  # some of its step is CPU
    # Half the core for the CPU part: slower, but not half as fast.
    slowed = profile.host_speed(0.5, (3,), 0.5)
    assert 0.5 < slowed < 1.0
    assert slowed == pytest.approx(step / (sleep + (step - sleep) / 0.5))
    assert _profile().launched(3, 100, 1, 0.5).host_speed(0.5, (3,), 0.5) == 0.5


def test_a_replayed_job_tells_its_shape_only_once_it_ran() -> None:
    needs = Needs(speed_model=True)
    told = arrived(SimJob("t", 0.0, _profile(), max_gpus=4), 0.0)
    assert told.view(4, needs, 0.0).shape == _profile().shape
    replayed = arrived(SimJob("r", 0.0, _profile(), max_gpus=4, shape_told=False), 0.0)
    assert replayed.view(4, needs, 0.0).shape == UNREPORTED
    _run(replayed, 1, 1.0)
    assert replayed.view(4, needs, 0.0).shape == _profile().shape
