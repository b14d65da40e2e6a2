"""Goodput: jobs that pick their own batch, and Pollux's allocation over them (issue 57)."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from ringleader.perf.allreduce import Algorithm
from ringleader.perf.epochs import EpochsToConverge
from ringleader.perf.goodput import GoodputSpeed, best_split
from ringleader.perf.measured import BatchSplit, read_measured_job
from ringleader.policy.catalog import policy_from_config
from ringleader.policy.model.objective import Candidate
from ringleader.policy.model.views import JobShape, JobView, Observation
from ringleader.policy.size.fitness import PowerMeanSpeedup, _cheapest, _greedy
from ringleader.policy.size.goodput import SHORTER_FIRST
from ringleader.sim import pollux
from ringleader.sim.submitted import SimJob
from ringleader.sim.tabled import adaptive_profile
from tests.helpers import PER_EXAMPLE_MODEL

CIFAR10 = read_measured_job(pollux.DATA / "traces" / "cifar10", epochs=100)


def _rate(split: BatchSplit, placement: tuple[int, ...], epoch: int) -> float:
    step, sync = CIFAR10.table.times(placement, split.micro_batch)
    seconds = step + split.accumulation * (step - sync)
    return CIFAR10.efficiency.gain(split.global_batch, epoch) / seconds


def test_the_best_batch_beats_every_other_the_job_may_take_and_grows_as_it_trains() -> None:
    placement = (4, 4)
    early, early_split = best_split(CIFAR10, placement, 0)
    late, late_split = best_split(CIFAR10, placement, 99)
    assert early == pytest.approx(_rate(early_split, placement, 0))
    for micro in (32, 64, 128, 256, 512):
        assert _rate(BatchSplit(8, micro, 0), placement, 0) <= early * 1.0001
    # Gradient noise grows as training goes on, so larger batches pay more later.
    assert late_split.global_batch > 2 * early_split.global_batch
    assert late > early


def test_an_adaptive_job_goes_faster_late_in_training_and_tells_its_goodput() -> None:
    profile = adaptive_profile(CIFAR10, 256, max_gpus=16, per_node=4)
    assert profile.phase(0.0) == 0 and profile.phase(1.0) == 99
    assert profile.seconds_on((4, 4), 0.9) < profile.seconds_on((4, 4), 0.0)
    told = profile.speed_model
    assert isinstance(told, GoodputSpeed)
    assert told.goodput(8, 0.0) == profile.best((4, 4), 0)[0]


def test_an_adaptive_job_alone_finishes_when_its_epochs_goodputs_say() -> None:
    profile = adaptive_profile(CIFAR10, 256, max_gpus=4, per_node=4)
    job = SimJob("solo", 0.0, profile, max_gpus=4, min_gpus=4, requested_gpus=4)
    result = pollux.play([job], policy_from_config("fifo"))
    bounds = CIFAR10.efficiency.bounds
    expected = pollux.RESTART_S + sum(
        (bounds[e + 1] - bounds[e]) / profile.best((4,), e)[0] for e in range(100)
    )
    assert result.records[0].jct == pytest.approx(expected, rel=1e-6)


def test_an_adaptive_job_reports_the_batch_it_picked_beside_the_step_time_it_took() -> None:
    # An online model fitted from the job's reports must see each step time at the
    # batch it was taken at, not at the share of the batch the job was submitted with.
    from ringleader.policy.model.plan import Assignment
    from ringleader.policy.model.views import Device
    from ringleader.sim.jobs import arrived

    profile = adaptive_profile(CIFAR10, 256, max_gpus=4, per_node=4)
    job = SimJob("solo", 0.0, profile, max_gpus=4, min_gpus=4, requested_gpus=4)
    state = arrived(job, 0.0)
    devices = tuple(Device("n0", i) for i in range(4))
    state.carry_out(Assignment(devices, 4), alive=True)
    state.pace()
    state.advance(0.0, 10.0)
    _, split = profile.best((4,), 0)
    picked = split.micro_batch * (split.accumulation + 1)
    assert picked != profile.shape.batch_at(4)
    seen = state.observations[4]
    assert seen.batch_per_worker == picked
    assert seen.step_time == pytest.approx(profile.step_time_on((4,), 0.0))
    late = profile.best((4,), 99)[1]
    assert profile.batch_on((4,), 1.0) == late.micro_batch * (late.accumulation + 1) > picked


def test_the_allocation_is_the_cheapest_over_every_split_of_the_gpus() -> None:
    rng = random.Random(7)
    for _ in range(30):
        jobs, gpus = rng.randint(1, 4), rng.randint(0, 6)
        costs = [np.asarray([rng.uniform(0, 10) for _ in range(rng.randint(1, 5))])]
        costs += [np.asarray([rng.uniform(0, 10) for _ in range(rng.randint(1, 5))])]
        costs = costs[:jobs] + [np.asarray([rng.uniform(0, 10)]) for _ in range(jobs - 2)]
        got = _cheapest(costs, gpus)
        assert sum(got) <= gpus
        best = min(
            sum(c[k] for c, k in zip(costs, ks, strict=True))
            for ks in itertools.product(*(range(len(c)) for c in costs))
            if sum(ks) <= gpus
        )
        assert sum(c[k] for c, k in zip(costs, got, strict=True)) == pytest.approx(best)


def test_the_greedy_for_large_clusters_stays_within_capacity_and_near_the_best() -> None:
    rng = random.Random(11)
    for _ in range(30):
        costs = [
            (np.linspace(1.0, 0.1, rng.randint(2, 9)) + rng.uniform(0, 0.5)) ** 2
            for _ in range(rng.randint(1, 6))
        ]
        gpus = rng.randint(0, 20)
        greedy, exact = _greedy(costs, gpus), _cheapest(costs, gpus)
        assert sum(greedy) <= gpus
        total = [sum(c[k] for c, k in zip(costs, ks, strict=True)) for ks in (greedy, exact)]
        assert total[0] <= total[1] * 1.05  # convex costs: the greedy is all but exact


def test_pollux_serves_every_job_before_it_serves_any_well() -> None:
    profile = adaptive_profile(CIFAR10, 256, max_gpus=16, per_node=4)
    jobs = [SimJob(f"j{i}", 0.0, profile, max_gpus=16, min_gpus=1) for i in range(6)]
    result = pollux.play(jobs, policy_from_config("pollux"), until=120.0)
    assert len(result.progress) == 6
    assert all(p.done_fraction > 0 for p in result.progress)


def test_pollux_is_within_10_percent_of_its_own_simulator_on_a_light_workload() -> None:
    where = pollux.bundled_workload("workload-5", "0.5")
    jobs = pollux.pollux_jobs(where, pollux.DATA / "traces", adaptive=True)
    result = pollux.play(jobs, policy_from_config("pollux"))
    published = pollux.published_avg("pollux", "workload-5", "0.5")
    assert published is not None
    assert result.summary.avg_jct_s == pytest.approx(published, rel=0.10)


def test_pollux_gives_a_job_with_no_speed_model_the_least_it_runs_on_not_nothing() -> None:
    # On the server a job measured at one size has no speed model yet: the allocation
    # once left it out, and it waited forever with the GPUs free. None below min_gpus.
    shape = JobShape(50_000, 64, 1e6, Algorithm.RING, global_batch=256)
    one = JobView("one", 0.0, shape, EpochsToConverge.constant(1), max_gpus=1)
    wide = JobView("wide", 0.0, shape, EpochsToConverge.constant(1), min_gpus=3, max_gpus=4)
    alone = PowerMeanSpeedup().grow([Candidate(one, None)], {}, 1)
    assert alone.counts == {"one": 1}
    both = PowerMeanSpeedup().grow([Candidate(one, None), Candidate(wide, None)], {}, 4)
    assert both.counts == {"one": 1, "wide": 3}
    assert PowerMeanSpeedup().grow([Candidate(wide, None)], {}, 2).counts == {}


def _near_and_far() -> list[Candidate]:
    """Two jobs alike but for how much is left: a tenth of their work, and nine tenths."""
    shape = JobShape(50_000, 64, 1e6, Algorithm.RING, global_batch=256)
    seen = {1: Observation(0.1, 10.0, 256.0), 4: Observation(0.1, 10.0, 64.0)}
    views = [
        JobView(
            name,
            0.0,
            shape,
            EpochsToConverge.constant(10),
            max_gpus=4,
            remaining_fraction=left,
            observations=seen,
        )
        for name, left in (("near", 0.1), ("far", 0.9))
    ]
    return [Candidate(v, PER_EXAMPLE_MODEL) for v in views]


def test_shortest_first_gives_the_gpus_to_the_job_nearer_its_end_where_they_help() -> None:
    # Two jobs alike but for how much is left: the p-mean splits four GPUs evenly, the
    # shortest-first objective gives the nearer one the GPUs that still speed it up.
    jobs = _near_and_far()
    assert PowerMeanSpeedup().grow(jobs, {}, 4).counts == {"near": 2, "far": 2}
    shortest = PowerMeanSpeedup(shortest_first=0.5).grow(jobs, {}, 4).counts
    assert shortest["near"] > shortest.get("far", 0) and sum(shortest.values()) == 4


def test_the_default_leaves_the_far_job_a_gpu_that_srpt_would_give_the_near_one() -> None:
    # Speed-up over remaining seconds (SRPT's weighing, a = 1) gives every GPU to the job
    # nearer its end; the default's weight by rank (goodput.SHORTER_FIRST) leaves the far
    # job one, where a fourth GPU adds little to the near one.
    jobs = _near_and_far()
    srpt = PowerMeanSpeedup(shortest_first=1.0).grow(jobs, {}, 4).counts
    assert srpt == {"near": 4}
    assert SHORTER_FIRST.grow(jobs, {}, 4).counts == {"near": 3, "far": 1}
