"""Policies are compositions of public stages; a user's own stage plugs in (docs/policies.md)."""

from __future__ import annotations

import importlib.util
import random
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType

import pytest

from ringleader.perf.epochs import EpochsToConverge
from ringleader.policy import ClusterView, JobShape, JobView, policy_named
from ringleader.policy.model.objective import Candidate
from ringleader.policy.model.views import Device
from ringleader.policy.order.queues import LeastAttained, Prioritised, ShortestRemaining
from ringleader.policy.pipeline import Policy
from ringleader.policy.place.fewest_nodes import FewestNodes
from ringleader.policy.place.type_aware import TypeAware
from ringleader.policy.size.allocators import FixedSize
from ringleader.sim import RESNET110_K40, SimJob, Simulator

ROOT = Path(__file__).resolve().parent.parent
SHAPE = JobShape(50_000, 128, 1e7)


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("my_policy", ROOT / "examples" / "my_policy.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["my_policy"] = module
    spec.loader.exec_module(module)
    return module


def _view(job_id: str, at: float, gpus: int = 1, **kw: object) -> JobView:
    return JobView(
        job_id,
        at,
        SHAPE,
        EpochsToConverge.constant(10),
        requested_gpus=gpus,
        min_gpus=gpus,
        max_gpus=gpus,
        elastic=False,
        **kw,  # type: ignore[arg-type]
    )


def test_a_user_written_order_stage_is_a_whole_policy() -> None:
    example = _example()
    # One 8-GPU job and three 1-GPU jobs behind it on 8 GPUs, the wide one running first.
    jobs = [SimJob("wide", 0.0, RESNET110_K40, requested_gpus=8, max_gpus=8, elastic=False)]
    jobs += [
        SimJob(f"small{i}", 1.0 + i, RESNET110_K40, elastic=False, work_scale=0.05)
        for i in range(3)
    ]
    jobs.append(SimJob("wide2", 2.0, RESNET110_K40, requested_gpus=8, max_gpus=8, elastic=False))
    cluster = ClusterView.uniform(1, 8)
    mine = Simulator(example.smallest_first(), cluster, jobs).run()
    fifo = Simulator(policy_named("fifo"), cluster, jobs).run()
    assert mine.policy == "smallest-first"
    finish = {r.id: r.finished_at for r in mine.records}
    # The small jobs go before the second wide one, which FIFO runs first.
    assert all(finish[f"small{i}"] < finish["wide2"] for i in range(3))
    assert mine.summary.avg_jct_s < fifo.summary.avg_jct_s


def test_the_starvation_guard_puts_a_long_waiting_job_ahead_of_every_queue() -> None:
    served = _view("served", 0.0, attained_gpu_s=50_000.0, state_since=0.0)
    fresh = _view("fresh", 100.0, state_since=100.0)
    candidates = [Candidate(served, None), Candidate(fresh, None)]
    plain = LeastAttained((3600.0,))
    guarded = LeastAttained((3600.0,), starve_after_s=1000.0)
    assert [c.job.id for c in plain.order(candidates, 5000.0)] == ["fresh", "served"]
    assert [c.job.id for c in guarded.order(candidates, 5000.0)] == ["served", "fresh"]
    assert [c.job.id for c in guarded.order(candidates, 500.0)] == ["fresh", "served"]


@pytest.mark.parametrize("seed", range(6))
def test_least_attained_orders_as_a_stable_sort_by_queue(seed: int) -> None:
    rng = random.Random(seed)
    jobs = []
    for i in range(rng.randint(0, 60)):
        running = rng.random() < 0.5
        jobs.append(
            _view(
                f"j{i}",
                float(i),
                attained_gpu_s=rng.choice([0.0, 3599.0, 3600.0, 20_000.0, 40_000.0]),
                state_since=rng.uniform(0, 5000),
                workers=1 if running else 0,
                suspended=running and rng.random() < 0.3,
            )
        )
    candidates = [Candidate(j, None) for j in jobs]
    rng.shuffle(candidates)
    for stage in (
        LeastAttained(),
        LeastAttained((3600.0,), starve_after_s=1000.0),
        LeastAttained((), starve_after_s=2000.0),
    ):
        want = sorted(candidates, key=lambda c: stage.queue(c, 5000.0))
        assert stage.order(candidates, 5000.0) == want


def test_priority_goes_first_and_the_inner_order_keeps_ties() -> None:
    jobs = [_view("a", 0.0), _view("b", 1.0, priority=2), _view("c", 2.0)]
    policy = Policy("p", FixedSize(None, backfill=True), order=Prioritised())
    plan = policy.decide(jobs, ClusterView.uniform(1, 2), 0.0)
    assert [j.id for j in jobs if plan.of(j.id).running] == ["a", "b"]
    ordered = Prioritised().order([Candidate(j, None) for j in jobs], 0.0)
    assert [c.job.id for c in ordered] == ["b", "a", "c"]


def test_a_stage_that_reads_the_truth_makes_the_policy_an_oracle() -> None:
    oracle = Policy("o", FixedSize(None), order=ShortestRemaining())
    assert oracle.needs.true_remaining and oracle.needs.oracle
    assert not Policy("t", FixedSize(None), order=LeastAttained()).needs.oracle


def test_a_kept_candidate_is_used_only_for_the_very_view_it_was_made_from() -> None:
    from dataclasses import replace

    from ringleader.policy.model.views import Device, Observation
    from ringleader.policy.profile._incremental.candidates import LastCandidates
    from ringleader.spine.views import progress_view
    from tests.helpers import resnet_job

    made: list[str] = []

    def make(job: JobView) -> Candidate:
        made.append(job.id)
        return Candidate(job, job.speed)

    seen = {1: Observation(0.5, 60.0, 128)}
    job = resnet_job("a", workers=1, devices=(Device("n0", 0),), observations=seen)
    memo = LastCandidates()
    first = memo.split([job], make)[0]
    progress_view(job, 0.5, 100.0, None)  # progress moved on in place: still the same
    seen[1] = Observation(0.5, 120.0, 128)  # measured longer at the same step: the same
    assert memo.split([job], make)[0] is first and made == ["a"]
    assert first.job.remaining_fraction == 0.5  # the kept candidate reads it from the view
    # A new step time comes in a new view (spine.views): made again.
    other = replace(job, observations={1: Observation(0.6, 120.0, 128)})
    assert memo.split([other], make)[0] is not first and made == ["a", "a"]
    memo.split([replace(other)], make)  # an equal view, but another object: made again
    assert made == ["a", "a", "a"]
    # Each view keeps the candidate made from it (views.Memo), for this memo alone.
    assert memo.kept(job) is first and memo.kept(other) is not None
    assert LastCandidates().kept(job) is None and memo.kept(replace(job)) is None
    last = replace(other)
    memo.split([last], make)
    assert memo.kept(last) is not None and memo.kept(replace(last)) is None


@pytest.mark.parametrize("window_s", [0.0, 60.0, 150.0])
def test_exploratory_sets_aside_exactly_the_jobs_it_has_a_probe_for(window_s: float) -> None:
    """``split``'s probing jobs are those ``probe`` has a probe for, whether or not a job
    has run (a job with no observations probes its first size while the window is any
    time at all), and a second split of the same views gives the very same candidates."""
    from ringleader.policy.model.views import Observation
    from ringleader.policy.profile.sources import Exploratory
    from tests.helpers import resnet_job

    rng = random.Random(int(window_s))
    stage = Exploratory(probe_sizes=(1, 2, 4), window_s=window_s)
    jobs = []
    for i in range(60):
        seen = {
            w: Observation(0.5, rng.choice((0.0, 30.0, 60.0, 200.0)), 128)
            for w in (1, 2, 4)
            if rng.random() < 0.5
        }
        jobs.append(resnet_job(f"j{i:02d}", at=float(i), max_gpus=4, observations=seen))
    known, exploring = stage.split(jobs)
    assert exploring == [j for j in jobs if stage.probe(j) is not None]
    assert [c.job for c in known] == [j for j in jobs if stage.probe(j) is None]
    assert (len(exploring) == 0) == (window_s == 0.0)
    again, _ = stage.split(jobs)
    assert all(a is b for a, b in zip(again, known, strict=True))


def test_exploratory_keeps_a_profiled_jobs_fitted_candidate_for_the_same_view() -> None:
    from dataclasses import replace

    from ringleader.policy.model.views import Observation
    from ringleader.policy.profile.sources import Exploratory, fitted_model
    from tests.helpers import resnet_job

    stage = Exploratory(probe_sizes=(1, 2), window_s=60.0)
    seen = {1: Observation(0.5, 60.0, 128), 2: Observation(0.3, 30.0, 128)}
    job = resnet_job("a", max_gpus=2, observations=seen)
    known, exploring = stage.split([job])
    assert (known, exploring) == ([], [job])  # its probe at 2 GPUs ran 30 s of 60
    seen[2] = Observation(0.3, 60.0, 128)  # now profiled: a candidate, fitted
    (first,), exploring = stage.split([job])
    assert exploring == [] and first.job is job and first.speed == fitted_model(job)
    assert stage.split([job])[0][0] is first  # the same view: kept
    # A new step time comes in a new view (spine.views): fitted again.
    later = replace(job, observations={**seen, 2: Observation(0.28, 90.0, 128)})
    (again,), _ = stage.split([later])
    assert again is not first and again.speed == fitted_model(later) != first.speed


def test_kept_candidates_of_jobs_that_left_go_with_their_views() -> None:
    # The memo holds nothing of its own: each candidate hangs on its view (views.Memo),
    # so a view that comes back is not made again, and one the body dropped takes its
    # candidate with it.
    import gc

    from ringleader.policy.profile._incremental.candidates import LastCandidates
    from tests.helpers import resnet_job

    made: list[str] = []

    def make(job: JobView) -> Candidate:
        made.append(job.id)
        return Candidate(job, job.speed)

    def alive() -> set[str]:
        gc.collect()
        return {o.job.id for o in gc.get_objects() if type(o) is Candidate}

    jobs = [resnet_job(f"j{i:03d}") for i in range(200)]
    memo = LastCandidates()
    memo.split(jobs, make)
    memo.split(jobs[:100], make)
    assert len(made) == 200
    assert [c.job for c in memo.split(jobs[:150], make)] == jobs[:150] and len(made) == 200
    assert {f"j{i:03d}" for i in range(200)} <= alive()
    del jobs[10:]  # the body drops 190 views
    assert not {f"j{i:03d}" for i in range(10, 200)} & alive()
    back = memo.split(jobs[:1], make)[0]
    assert back.job is jobs[0] and len(made) == 200  # never made again


def test_fifo_is_submission_order_then_id_whatever_order_jobs_come_in() -> None:
    import random

    from ringleader.policy.model.arrival import fifo
    from tests.helpers import resnet_job

    rng = random.Random(3)
    jobs = [resnet_job(f"j{i % 7}-{i}", at=float(rng.randrange(5))) for i in range(40)]
    expected = sorted(jobs, key=lambda j: (j.submitted_at, j.id))
    for _ in range(5):
        rng.shuffle(jobs)
        assert fifo(jobs) == expected
    in_order = fifo(expected)
    assert in_order == expected and in_order is not expected  # a list of its own
    tie = [resnet_job("b", at=1.0), resnet_job("a", at=1.0)]
    assert [j.id for j in fifo(tie)] == ["a", "b"]


class _Generous:
    """A user's place stage that gives every job one GPU more than its count."""

    def place(
        self, counts: Mapping[str, int], jobs: Sequence[JobView], cluster: ClusterView
    ) -> dict[str, tuple[Device, ...]]:
        free = [Device(n.name, i) for n in cluster.nodes for i in range(n.gpus)]
        out: dict[str, tuple[Device, ...]] = {}
        for job in jobs:
            want = counts.get(job.id, 0)
            if want:
                out[job.id], free = tuple(free[: want + 1]), free[want + 1 :]
        return out


def test_a_job_runs_on_no_more_workers_than_its_size_whatever_the_place_stage_gives() -> None:
    jobs = [_view("a", 0.0, 2), _view("b", 1.0, 1), _view("c", 2.0, 4)]
    cluster = ClusterView.uniform(2, 8)
    generous = Policy("generous", FixedSize(None), place=_Generous()).decide(jobs, cluster, 0.0)
    assert {j: (a.workers, len(a.devices)) for j, a in generous.assignments.items()} == {
        "a": (2, 3),
        "b": (1, 2),
        "c": (4, 5),
    }
    # Ours give each job exactly its size here (TypeAware on one type is FewestNodes).
    for place in (FewestNodes(), TypeAware()):
        plan = Policy("ours", FixedSize(None), place=place).decide(jobs, cluster, 0.0)
        assert {j: (a.workers, len(a.devices)) for j, a in plan.assignments.items()} == {
            "a": (2, 2),
            "b": (1, 1),
            "c": (4, 4),
        }
