"""Finish-time fairness: no job's shared finish is stretched much more than another's."""

from __future__ import annotations

from ringleader.perf.measured import read_measured_job
from ringleader.policy.catalog import policy_from_config
from ringleader.policy.order.finish_time import ROUND_S
from ringleader.sim import pollux
from ringleader.sim.submitted import SimJob
from ringleader.sim.tabled import tabled_profile

CIFAR10 = read_measured_job(pollux.DATA / "traces" / "cifar10", epochs=100)


def _pair() -> list[SimJob]:
    profile = tabled_profile(CIFAR10, 4096, max_gpus=64, per_node=4)
    return [
        SimJob(name, 0.0, profile, max_gpus=64, min_gpus=64, requested_gpus=64, elastic=False)
        for name in ("a", "b")
    ]


def test_two_jobs_that_each_want_the_cluster_take_turns_and_finish_together() -> None:
    fair = {r.id: r.finished_at for r in pollux.play(_pair(), policy_from_config("ftf")).records}
    fifo = {r.id: r.finished_at for r in pollux.play(_pair(), policy_from_config("fifo")).records}
    assert fifo["a"] is not None and fifo["b"] is not None
    assert fair["a"] is not None and fair["b"] is not None
    solo = fifo["a"]
    assert fifo["b"] > 1.9 * solo  # first come, first served: b waits all of a
    # Finish-time fairness: turns of a round each, so both end near twice the solo time.
    assert abs(fair["a"] - fair["b"]) <= ROUND_S + 2 * pollux.RESTART_S
    assert max(fair.values()) < fifo["b"] + 60 * pollux.RESTART_S


def test_ftf_is_an_oracle_the_runtime_refuses() -> None:
    assert policy_from_config("ftf").needs.true_remaining
