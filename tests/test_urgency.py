"""How the default weighs a job's speed-up by how long it has left (``policy/size/urgency.py``)."""

from __future__ import annotations

import numpy as np
import pytest

from ringleader.policy.size.fitness import _cheapest
from ringleader.policy.size.goodput import SHORTER_FIRST, URGENCY
from ringleader.policy.size.urgency import LongerCount, RemainingPower


def test_the_rank_rule_weighs_the_order_of_remaining_times_not_their_ratios() -> None:
    rule = LongerCount(0.75)
    near = rule.weights([10.0, 100.0, 1_000.0])
    far_apart = rule.weights([1.0, 2.0, 1e9])
    assert near == far_apart == pytest.approx([3**0.75, 2**0.75, 1.0])


def test_jobs_with_the_same_remaining_time_weigh_the_same() -> None:
    assert LongerCount(1.0).weights([5.0, 1.0, 5.0]) == [2.0, 3.0, 2.0]


def test_the_remaining_power_rule_weighs_by_the_ratio_of_remaining_times() -> None:
    weights = RemainingPower(0.5).weights([100.0, 400.0])
    assert weights == pytest.approx([0.1, 0.05])


def test_the_default_weighs_by_rank() -> None:
    assert SHORTER_FIRST.urgency == URGENCY
    assert isinstance(URGENCY, LongerCount)


def test_on_power_speedups_the_rank_rule_shares_gpus_as_hesrpt_does() -> None:
    # heSRPT (Berg et al. 2020): jobs of speed-up k^p, all present, the i-th longest of m
    # gets (i/m)^(1/(1-p)) - ((i-1)/m)^(1/(1-p)) of the cluster; at p = 1/2 the shorter
    # half of the jobs holds 3/4 of it. Maximising Σ n^p k^p (n the jobs at least as
    # long) gives heSRPT's shares as the jobs grow many.
    p, jobs, gpus = 0.5, 16, 800
    weights = LongerCount(p).weights([float(j) for j in range(jobs, 0, -1)])
    k = np.arange(gpus + 1, dtype=float)
    counts = _cheapest([-w * k**p for w in weights], gpus)
    assert counts == sorted(counts) and counts[0] < counts[-1]  # the shortest holds most
    shorter_half = sum(counts[jobs // 2 :]) / gpus
    assert shorter_half == pytest.approx(0.75, abs=0.03)
    # The remaining-power rule shares by the ratio of remaining times instead: here, jobs
    # 1 to 16 seconds long, the shorter half holds more than heSRPT gives it.
    by_ratio = _cheapest(
        [-w * k**p for w in RemainingPower(1.0).weights([float(j) for j in range(jobs, 0, -1)])],
        gpus,
    )
    assert sum(by_ratio[jobs // 2 :]) / gpus > 0.9
