"""Kin: a job that adapts its batch is fitted from what the other jobs of its model
measured, as well as from its own step times (``spine.kin``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import pytest

from ringleader.perf.allreduce import Algorithm
from ringleader.perf.epochs import EpochsToConverge
from ringleader.perf.gradient import GradientReport
from ringleader.perf.overlap import OverlapSpeed
from ringleader.policy import ClusterView, JobView, Plan, policy_named
from ringleader.policy.model.needs import Needs
from ringleader.policy.model.plan import Decider
from ringleader.policy.model.views import JobShape, Observation
from ringleader.policy.profile.sources import Online
from ringleader.runtime.control.rowview import row_view, seed_kin
from ringleader.runtime.state.rows import JobRow, State
from ringleader.runtime.state.spec import parse_spec
from ringleader.runtime.state.store import Store
from ringleader.sim import pollux
from ringleader.sim.submitted import SimJob
from ringleader.sim.timed import Timed
from ringleader.spine.kin import NO_KIN, KinBook

SHAPE = JobShape(50_000, 32, 1e6, Algorithm.RING)


def _step(k: int, batch: float = 32.0) -> float:
    """A step that computes ``batch`` examples in 1 ms each and syncs for longer on more GPUs."""
    return 0.001 * batch + 0.002 * k


def _seen(*sizes: int) -> dict[int, Observation]:
    return {k: Observation(_step(k), 60.0, 32.0) for k in sizes}


def test_a_models_kin_is_the_same_mapping_until_a_step_time_changes() -> None:
    book = KinBook()
    assert book.kin(SHAPE) is NO_KIN
    book.record(SHAPE, _seen(1, 4))
    first = book.kin(SHAPE)
    assert dict(first) == _seen(1, 4)
    # Measured for longer at the same step time: nothing a fit reads has changed.
    book.record(SHAPE, {4: Observation(_step(4), 600.0, 32.0)})
    assert book.kin(SHAPE) is first
    # Another job of the model runs at 8 GPUs: its model's kin now says so.
    joined = book.joined(dataclasses.replace(SHAPE, batch_per_worker=64), _seen(8))
    assert joined is not first and sorted(joined) == [1, 4, 8]
    # Another model (other data, or another gradient size) is not kin.
    assert book.kin(dataclasses.replace(SHAPE, examples_per_epoch=60_000)) is NO_KIN
    assert book.kin(dataclasses.replace(SHAPE, grad_bytes=2e6)) is NO_KIN


def _job(seen: dict[int, Observation], kin: dict[int, Observation], reports: bool) -> JobView:
    job = JobView("a", 0.0, SHAPE, EpochsToConverge.constant(10), observations=seen, kin=kin)
    if reports:
        job = dataclasses.replace(job, gradient=GradientReport(1e-3, 4.0, 32, 4096))
    return job


def test_a_job_seen_at_one_size_is_fitted_from_its_kins_sizes_too() -> None:
    alone, _ = Online.plain_model(_job(_seen(2), {}, reports=True), 4)
    assert not isinstance(alone, OverlapSpeed)  # one size: the prior of perfect scaling
    model, measured = Online.plain_model(_job(_seen(2), _seen(1, 8), reports=True), 4)
    assert isinstance(model, OverlapSpeed) and measured
    assert model.step_time(8, 32.0) == pytest.approx(_step(8), rel=0.05)
    # A job that keeps its batch is fitted from its own step times only.
    kept, _ = Online.plain_model(_job(_seen(2), _seen(1, 8), reports=False), 4)
    assert not isinstance(kept, OverlapSpeed)


def test_a_jobs_own_step_time_wins_over_its_kins_at_the_same_size() -> None:
    slow = {2: Observation(3 * _step(2), 60.0, 32.0), 8: Observation(3 * _step(8), 60.0, 32.0)}
    model, _ = Online.plain_model(_job(slow, _seen(2, 8), reports=True), 4)
    assert model.step_time(8, 32.0) == pytest.approx(3 * _step(8), rel=0.05)


class _Watching(Timed):
    """``policy``, keeping the sizes each job it was asked about ran at and was told of by
    its kin, as they were then (a view's mappings are the body's, and move on);
    ``forget``: what the policy kept, before each decision."""

    def __init__(self, policy: Decider, forget: bool = False) -> None:
        super().__init__(policy)
        self.forget = forget
        self.views: list[tuple[str, set[int], set[int]]] = []

    def decide(self, jobs: Sequence[JobView], cluster: ClusterView, now: float) -> Plan:
        if self.forget:
            self.policy.forget()  # type: ignore[attr-defined]
        self.views.extend((v.id, set(v.observations), set(v.kin)) for v in jobs)
        return super().decide(jobs, cluster, now)


def _cifar10(count: int) -> list[SimJob]:
    """``count`` of workload-1's cifar10 jobs, arriving ten minutes apart."""
    jobs = pollux.pollux_jobs(
        pollux.bundled_workload("workload-1"), pollux.DATA / "traces", adaptive=True
    )
    cifar = [j for j in jobs if j.id.startswith("cifar10-")][:count]
    return [dataclasses.replace(j, submitted_at=600.0 * i) for i, j in enumerate(cifar)]


def test_the_simulator_tells_a_job_the_sizes_an_earlier_job_of_its_model_ran_at() -> None:
    jobs = _cifar10(3)
    watching = _Watching(policy_named("ringleader"))
    pollux.play(jobs, watching)
    first = {k for job, own, _ in watching.views if job == jobs[0].id for k in own}
    told = [kin - own for job, own, kin in watching.views if job == jobs[2].id and kin]
    assert told[0] and told[0] <= first | {k for _, own, _ in watching.views for k in own}
    # The first job, alone of its model when it starts, is told only its own sizes.
    alone = [kin == own for job, own, kin in watching.views if job == jobs[0].id and kin]
    assert alone[0]


def test_the_default_that_forgets_before_every_decision_plays_the_same_run_with_kin() -> None:
    jobs = _cifar10(4)
    kept = pollux.play(jobs, policy_named("ringleader"))
    forgetful = _Watching(policy_named("ringleader"), forget=True)
    again = pollux.play(jobs, forgetful)
    assert (kept.records, kept.counts, kept.decisions) == (
        again.records,
        again.counts,
        again.decisions,
    )
    assert any(kin - own for _, own, kin in forgetful.views)


def _row(job_id: str, sizes: dict[str, list[float]]) -> JobRow:
    spec = parse_spec(
        {
            "name": "g",
            "command": "x",
            "elastic": True,
            "max_gpus": 8,
            "batch": {"global_min": 32, "global_max": 512, "per_gpu_max": 128},
        }
    )
    row = JobRow(id=job_id, seq=1, spec=spec, state=State.QUEUED, submitted_at=0.0)
    row.shape.update(examples_per_epoch=50_000, grad_bytes=1e6, grad_sqr=0.01, grad_var=4.0)
    row.observations = sizes
    return row


def test_the_runtime_tells_a_job_the_sizes_another_of_its_model_ran_at() -> None:
    book, cluster = KinBook(), ClusterView.uniform(2, 4)
    ran = _row("j1", {"1": [0.033, 60.0, 100, 32], "8": [0.048, 60.0, 100, 32]})
    new = _row("j2", {"2": [0.036, 10.0, 100, 32]})
    row_view(ran, cluster, None, needs=Needs(), restart_s=30.0, book=book)
    view = row_view(new, cluster, None, needs=Needs(), restart_s=30.0, book=book)
    assert sorted(view.kin) == [1, 2, 8] and sorted(view.observations) == [2]
    # Without a book, or for a job that keeps its batch, a view has no kin.
    assert not row_view(new, cluster, None, needs=Needs(), restart_s=30.0).kin
    plain = _row("j3", {"2": [0.036, 10.0, 100, 32]})
    plain.shape.pop("grad_sqr")
    assert not row_view(plain, cluster, None, needs=Needs(), restart_s=30.0, book=book).kin


def test_a_restarted_server_reads_back_what_its_finished_jobs_measured(tmp_path: Path) -> None:
    store = Store(tmp_path / "jobs.db")
    cluster = ClusterView.uniform(2, 4)
    ran = _row("j1", {"1": [0.033, 60.0, 100, 32], "8": [0.048, 60.0, 100, 32]})
    done = store.add(ran.spec)
    done.shape.update(ran.shape)
    done.observations, done.state = ran.observations, State.SUCCEEDED
    store.save(done)
    queued = store.add(ran.spec)  # another of its model, never finished: not read back
    queued.shape.update(ran.shape)
    queued.observations = {"4": [0.04, 60.0, 100, 32]}
    store.save(queued)
    book = KinBook()
    assert seed_kin(book, store, cluster) == 1
    new = _row("j3", {"2": [0.036, 10.0, 100, 32]})
    view = row_view(new, cluster, None, needs=Needs(), restart_s=30.0, book=book)
    assert sorted(view.kin) == [1, 2, 8]
    store.close()
