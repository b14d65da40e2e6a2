"""Goodput in the default: jobs that adapt their batch report their gradient, and are
sized by the goodput it implies (issue 58)."""

from __future__ import annotations

import dataclasses

import pytest

from ringleader.perf.allreduce import Algorithm
from ringleader.perf.epochs import EpochsToConverge
from ringleader.perf.goodput import GoodputSpeed
from ringleader.perf.gradient import GradientReport, best_goodput
from ringleader.policy.catalog import policy_from_config
from ringleader.policy.model.views import JobShape, JobView, Observation
from ringleader.policy.profile.sources import Online
from ringleader.policy.size.goodput import GoodputWhereReported
from ringleader.scenarios import table3
from ringleader.sim import Simulator
from tests.helpers import PER_EXAMPLE_MODEL

MODEL = PER_EXAMPLE_MODEL


def _report(sqr: float, var: float) -> GradientReport:
    return GradientReport(sqr, var, smallest_batch=128, largest_batch=4096)


def test_a_noiseless_gradient_is_worth_no_larger_batch_and_a_noisy_one_every_example() -> None:
    # No variance: a larger batch makes no more progress a step, so the smallest wins
    # and 8 GPUs are worth only what a shorter step at 16 examples each gives.
    quiet = best_goodput(MODEL, _report(1.0, 0.0), 8)
    assert quiet == pytest.approx(1.0 / MODEL.step_time(8, 128 / 8))
    # All variance: a step at M is worth M / M0 steps, so the largest batch wins.
    noisy = best_goodput(MODEL, _report(1e-9, 1.0), 8)
    assert noisy == pytest.approx((4096 / 128) / MODEL.step_time(8, 4096 / 8), rel=1e-6)
    assert noisy > 3 * quiet


def test_the_online_profile_tells_goodput_only_for_a_job_that_reports_its_gradient() -> None:
    shape = JobShape(50_000, 64, 1e6, Algorithm.RING, global_batch=256)
    seen = {1: Observation(0.3, 60.0, 256.0), 2: Observation(0.18, 60.0, 128.0)}
    plain = JobView("a", 0.0, shape, EpochsToConverge.constant(10), observations=seen)
    reporting = dataclasses.replace(plain, gradient=_report(1.0, 4.0))
    assert not isinstance(Online._candidate(plain).speed, GoodputSpeed)
    told = Online._candidate(reporting).speed
    assert isinstance(told, GoodputSpeed) and told.goodput(4, 0.0) > told.goodput(1, 0.0) > 0


def test_a_job_measured_at_one_size_is_told_that_more_gpus_would_help_it() -> None:
    # Weak scaling (the runtime's jobs): the prior from one step time must not say a
    # step takes as long at any batch, or one GPU would take the largest batch as fast
    # as eight, every count would look alike, and it would never be measured at two.
    shape = JobShape(50_000, 32, 1e6, Algorithm.RING)
    once = {2: Observation(0.05, 60.0, 16.0)}
    job = JobView("a", 0.0, shape, EpochsToConverge.constant(10), observations=once)
    told = Online._candidate(dataclasses.replace(job, gradient=_report(1e-3, 4.0))).speed
    assert isinstance(told, GoodputSpeed)
    rates = [told.goodput(k, 0.0) for k in (1, 2, 4, 8)]
    assert rates == sorted(rates) and rates[-1] > 4 * rates[0]
    # The step time it was told is the one measured, at the batch it was measured at.
    assert told.step_time(2, 16.0) == pytest.approx(0.05)


def test_without_a_job_that_reports_its_gradient_the_default_sizes_as_it_did() -> None:
    default = policy_from_config("ringleader")
    assert isinstance(default.size, GoodputWhereReported)
    doubling = dataclasses.replace(default, size=default.size.inner)
    cluster, jobs = table3.cluster(), table3.workload("extreme", 0)
    ours = Simulator(default, cluster, jobs).run()
    theirs = Simulator(doubling, cluster, jobs).run()
    assert ours.records == theirs.records and ours.counts == theirs.counts
