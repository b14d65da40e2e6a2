"""The default on a cluster of several GPU types: jobs that adapt their batch get their
type and count chosen together (``policy.allot.shortest``), issue 58."""

from __future__ import annotations

import dataclasses

import pytest

from ringleader.perf.allreduce import Algorithm
from ringleader.perf.epochs import EpochsToConverge
from ringleader.perf.gradient import GradientReport
from ringleader.policy.allot.shortest import ShortestGoodput
from ringleader.policy.catalog import policy_from_config, with_types
from ringleader.policy.model.views import ClusterView, Device, JobShape, JobView, Observation
from ringleader.policy.profile.sources import Online
from ringleader.policy.size.goodput import TYPED, URGENCY
from ringleader.policy.size.urgency import RemainingPower, Urgency

CLUSTER = ClusterView.typed({"fast": (1, 4), "slow": (1, 4)})


def _job(name: str, slow: float, submitted: float = 0.0) -> JobView:
    """A job that adapts its batch and was measured at 1 and 2 GPUs, ``slow`` times as
    fast on the slow type as on the fast one."""
    shape = JobShape(50_000, 64, 1e6, Algorithm.RING, global_batch=256)
    seen = {1: Observation(0.3, 60.0, 256.0), 2: Observation(0.16, 60.0, 128.0)}
    return JobView(
        name,
        submitted,
        shape,
        EpochsToConverge.constant(10),
        observations=seen,
        gradient=GradientReport(1e-3, 4.0, smallest_batch=128, largest_batch=4096),
        max_gpus=8,
        type_speed={"fast": 1.0, "slow": slow},
    )


def test_each_job_gets_the_type_it_minds_least_to_lose_and_a_whole_type_each() -> None:
    # Alone, either would take all eight GPUs, spread over both types at the slow
    # type's pace or on the four fast ones; together each gets one type whole.
    minds, shrugs = _job("minds", slow=0.2), _job("shrugs", slow=0.9)
    allotted = TYPED.allot([Online._candidate(j) for j in (minds, shrugs)], CLUSTER, 0.0)
    assert dict(allotted.allotments) == {"minds": ("fast", 4), "shrugs": ("slow", 4)}


def test_the_default_lays_out_what_it_allotted_no_job_spread_over_types() -> None:
    # Sized by counts and then placed, the third job spread over both types at the
    # slow one's pace, and the second job, which minds the slow type, ran on it.
    jobs = [_job("minds", 0.2), _job("minds-too", 0.2, 1.0), _job("shrugs", 0.9, 2.0)]
    plan = policy_from_config("ringleader").decide(jobs, CLUSTER, 0.0)
    types = {
        job_id: {CLUSTER.type_of(d.node) for d in a.devices[: a.workers]}
        for job_id, a in plan.assignments.items()
    }
    assert types == {"minds": {"fast"}, "minds-too": {"fast"}, "shrugs": {"slow"}}
    assert sum(a.workers for a in plan.assignments.values()) == CLUSTER.capacity


def test_a_job_is_not_given_more_than_trust_times_the_most_it_was_measured_on() -> None:
    cautious = ShortestGoodput(trust=1, urgency=RemainingPower(0.25))
    allotted = cautious.allot([Online._candidate(_job("measured", 0.9))], CLUSTER, 0.0)
    assert allotted.allotments["measured"].gpus <= 2


def test_on_one_gpu_type_the_default_sizes_by_counts_as_before() -> None:
    default = policy_from_config("ringleader")
    uniform = ClusterView.uniform(2, 4)
    candidates = [Online._candidate(_job("a", 1.0))]
    assert default.size.allot_types(candidates, uniform, 0.0) is None  # type: ignore[attr-defined]
    assert default.size.allot_types(candidates, CLUSTER, 0.0) is not None  # type: ignore[attr-defined]
    plain = dataclasses.replace(_job("a", 1.0), gradient=None)
    assert default.size.allot_types([Online._candidate(plain)], CLUSTER, 0.0) is None  # type: ignore[attr-defined]


def test_past_the_cells_it_can_solve_each_decision_the_default_sizes_by_counts() -> None:
    default = policy_from_config("ringleader")
    candidates = [Online._candidate(_job(f"j{i}", 0.5)) for i in range(3)]
    small = dataclasses.replace(default.size, typed=dataclasses.replace(TYPED, max_cells=1))  # type: ignore[type-var]
    assert small.allot_types(candidates, CLUSTER, 0.0) is None
    assert default.size.allot_types(candidates, CLUSTER, 0.0) is not None  # type: ignore[attr-defined]
    many = ClusterView.typed({"fast": (600, 8), "slow": (600, 8)})
    assert not TYPED.fits(5_000, many) and TYPED.fits(160, CLUSTER)


def test_a_rigid_job_beside_them_still_gets_its_request_on_one_type() -> None:
    # Sia's configurations offer 1, 2, 4 GPUs of a node: a job that must have 3, or one
    # not yet run that asks for 2, had no configuration and waited beside idle GPUs.
    rigid = dataclasses.replace(
        _job("rigid", 0.9, submitted=1.0),
        gradient=None,
        observations={},
        elastic=False,
        requested_gpus=3,
        min_gpus=3,
        max_gpus=3,
    )
    plan = policy_from_config("ringleader").decide([_job("minds", 0.2), rigid], CLUSTER, 0.0)
    got = plan.assignments["rigid"]
    assert got.workers == 3
    assert len({CLUSTER.type_of(d.node) for d in got.devices[: got.workers]}) == 1


def test_the_type_blind_twin_never_chooses_types(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object) -> None:
        raise AssertionError("the agnostic twin asked for typed allotments")

    blind = with_types(policy_from_config("ringleader"), False)
    monkeypatch.setattr(type(blind.size), "allot_types", refuse)  # type: ignore[attr-defined]
    plan = blind.decide([_job("minds", 0.2), _job("shrugs", 0.9, 1.0)], CLUSTER, 0.0)
    assert any(a.workers for a in plan.assignments.values())


@pytest.mark.parametrize(
    ("urgency", "epochs"),
    [(RemainingPower(0.5), 100_000), (RemainingPower(0.25), 10_000_000), (URGENCY, 10_000_000)],
)
def test_a_long_job_alone_on_one_gpu_of_an_idle_cluster_grows(
    urgency: Urgency, epochs: int
) -> None:
    """Its own costs are tiny (speed-ups over a long remaining time): a bias toward its
    present configuration of a fixed 0.01 outweighed every larger one, and it ran on
    one GPU of eight for good (workload-1 at ``remaining ^ 0.5``: 7x Sia's JCT)."""
    long = dataclasses.replace(
        _job("long", slow=0.9),
        epochs=EpochsToConverge.constant(epochs),
        devices=(Device("slow-0", 0),),
        workers=1,
        attained_gpu_s=3600.0,
        restart_s=30.0,
    )
    stage = ShortestGoodput(TYPED.trust, urgency)
    allotted = stage.allot([Online._candidate(long)], CLUSTER, 3600.0)
    assert allotted.allotments["long"].gpus > 1, allotted
