"""Fair share between users: the water-fill, the order, and a simulated day of two users."""

from __future__ import annotations

import random

import pytest

from ringleader.fairness import served
from ringleader.perf.epochs import EpochsToConverge
from ringleader.policy import ClusterView, JobShape, JobView, policy_named
from ringleader.policy.catalog import policy_from_config
from ringleader.policy.model.objective import Candidate
from ringleader.policy.order.fairshare import FairShare, waterfill
from ringleader.policy.order.queues import LeastAttained, Prioritised
from ringleader.policy.pipeline import Policy
from ringleader.policy.profile.sources import Online
from ringleader.policy.size.allocators import Doubling, FixedSize
from ringleader.sim import RESNET110_K40, SimJob, Simulator

SHAPE = JobShape(50_000, 128, 1e7)


def _view(job_id: str, user: str, *, at: float = 0.0, priority: int = 0, gpus: int = 1) -> JobView:
    return JobView(
        job_id,
        at,
        SHAPE,
        EpochsToConverge.constant(10),
        user=user,
        priority=priority,
        requested_gpus=gpus,
        min_gpus=gpus,
        max_gpus=gpus,
        elastic=False,
    )


def test_waterfill_gives_small_demands_in_full_and_splits_the_rest_by_weight() -> None:
    assert waterfill(16, {"a": 2, "b": 40, "c": 40}, {"a": 1, "b": 1, "c": 1}) == {
        "a": 2,
        "b": 7,
        "c": 7,
    }
    assert waterfill(16, {"a": 40, "b": 40}, {"a": 3, "b": 1}) == {"a": 12, "b": 4}
    assert waterfill(16, {"a": 3, "b": 4}, {"a": 1, "b": 1}) == {"a": 3, "b": 4}
    shares = waterfill(10, {"a": 9, "b": 9, "c": 9}, {"a": 1, "b": 1, "c": 1})
    assert sum(shares.values()) == 10 and max(shares.values()) - min(shares.values()) == 1


def test_the_order_interleaves_users_and_honours_priority_inside_a_share() -> None:
    jobs = [_view(f"a{i}", "ana", at=float(i)) for i in range(4)]
    jobs += [_view("b0", "bo", at=10.0), _view("b1", "bo", at=11.0, priority=5)]
    ordered = FairShare().order([Candidate(j, None) for j in jobs], 0.0)
    ids = [c.job.id for c in ordered]
    # bo's high-priority job goes first among bo's, and bo is served as early as ana.
    assert ids.index("b1") < ids.index("b0")
    assert ids[:4] == ["a0", "b1", "a1", "b0"]


def test_priority_does_not_buy_a_user_more_than_their_share() -> None:
    jobs = [_view(f"a{i}", "ana", priority=9) for i in range(8)]
    jobs += [_view(f"b{i}", "bo") for i in range(8)]
    policy = Policy("fair", FixedSize(None, backfill=True), order=FairShare(Prioritised()))
    plan = policy.decide(jobs, ClusterView.uniform(1, 8), 0.0)
    running = [j.id for j in jobs if plan.of(j.id).running]
    assert sum(1 for i in running if i.startswith("a")) == 4
    assert sum(1 for i in running if i.startswith("b")) == 4


def _two_users(heavy: int, light: int) -> list[SimJob]:
    """ana submits ``heavy`` two-hour jobs in the first minutes; bo one every 20 minutes."""
    scale = 2 * 3600 / RESNET110_K40.seconds_alone(1)
    jobs = [
        SimJob(f"ana{i}", 60.0 * i, RESNET110_K40, work_scale=scale, user="ana")
        for i in range(heavy)
    ]
    jobs += [
        SimJob(f"bo{i}", 1200.0 * i, RESNET110_K40, work_scale=scale, user="bo")
        for i in range(light)
    ]
    return jobs


def _worst(policy: Policy, jobs: list[SimJob], weights: dict[str, float] | None = None) -> dict:
    cluster = ClusterView.uniform(2, 8)
    result = Simulator(policy, cluster, jobs).run()
    rows = served(result.shares, cluster.capacity, step_s=600.0, weights=weights)
    assert rows, "no hour in which both users had jobs"
    worst: dict[str, float] = {}
    for r in rows:
        worst[r.user] = min(worst.get(r.user, float("inf")), r.ratio)
    return worst


def test_two_users_of_unequal_load_each_get_90_percent_of_their_share_every_hour() -> None:
    jobs = _two_users(heavy=40, light=12)
    worst = _worst(policy_named("ringleader"), jobs)  # type: ignore[arg-type]
    assert set(worst) == {"ana", "bo"}
    assert min(worst.values()) >= 0.9, worst
    # The same policy without the fair-share stage lets the heavy user crowd bo out.
    unfair = Policy(
        "unfair",
        Doubling(backfill=True, per_epoch=True),
        Online(),
        order=Prioritised(LeastAttained((36_000.0,))),
    )
    assert _worst(unfair, jobs)["bo"] < 0.9


def test_weights_set_the_shares() -> None:
    jobs = _two_users(heavy=40, light=16)
    weights = {"bo": 3.0}
    policy = policy_from_config("ringleader", user_weights=weights)
    worst = _worst(policy, jobs, weights)  # type: ignore[arg-type]
    assert min(worst.values()) >= 0.9, worst


def test_weights_must_be_positive() -> None:
    with pytest.raises(ValueError, match="weight of user 'x'"):
        FairShare(weights=(("x", 0.0),))


def test_shares_sum_each_users_demand_however_their_jobs_interleave() -> None:
    """Demands are summed per run of one user's jobs: interleaved users, runs of one,
    and a user coming back after others all count every job once."""

    rng = random.Random(3)
    for _ in range(50):
        jobs = [
            _view(f"j{i}", rng.choice(("ana", "bo", "cy")), at=float(i), gpus=rng.randint(1, 8))
            for i in range(rng.randint(1, 30))
        ]
        demands: dict[str, int] = {}
        for j in jobs:
            demands[j.user] = demands.get(j.user, 0) + j.requested_gpus
        capacity = rng.randint(1, 100)
        weights = {u: 1.0 for u in demands}
        candidates = [Candidate(j, None) for j in jobs]
        assert FairShare().shares(candidates, capacity) == waterfill(capacity, demands, weights)


class _Hidden:
    """An order that orders as the one it wraps, of a type ``FairShare`` does not know."""

    def __init__(self, inner: Prioritised) -> None:
        self.inner = inner
        self.needs_speed = self.needs_true_remaining = False

    def order(self, jobs: list[Candidate], now: float) -> list[Candidate]:
        return self.inner.order(jobs, now)


@pytest.mark.parametrize("users", [("ana",), ("ana", "bo", "cy")])
def test_order_and_shares_are_order_and_shares_from_one_pass(users: tuple[str, ...]) -> None:
    """One pass gives both; and around ``Prioritised`` (whose order each user's jobs keep
    already) the order is the one sorting each user's jobs by priority gives."""
    rng = random.Random(5)
    for _ in range(60):
        jobs = [
            Candidate(
                _view(
                    f"j{i}",
                    rng.choice(users),
                    at=float(i),
                    priority=rng.choice((0, 0, 0, 1, 5)),
                    gpus=rng.randint(1, 8),
                ),
                None,
            )
            for i in range(rng.randint(1, 40))
        ]
        for job in jobs:  # some attained service, for the LAS queues within
            object.__setattr__(job.job, "attained_gpu_s", rng.choice((0.0, 5e3, 5e4)))
        inner = Prioritised(LeastAttained((3600.0, 36_000.0)))
        fair = FairShare(inner)
        capacity = rng.randint(1, 100)
        ordered, shares = fair.order_and_shares(jobs, 0.0, capacity)
        assert ordered == fair.order(jobs, 0.0) == FairShare(_Hidden(inner)).order(jobs, 0.0)  # type: ignore[arg-type]
        assert shares == fair.shares(jobs, capacity)
        assert sorted(c.job.id for c in ordered) == sorted(c.job.id for c in jobs)
        for user in users:  # each user's jobs by priority, highest first
            theirs = [c.job.priority for c in ordered if c.job.user == user]
            assert theirs == sorted(theirs, reverse=True)
