"""Pollux's overlap step-time model, fitted online for jobs that adapt their batch (issue 58)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ringleader.perf.allreduce import Algorithm
from ringleader.perf.epochs import EpochsToConverge
from ringleader.perf.errors import ModelFitError
from ringleader.perf.gradient import (
    GradientReport,
    best_goodput,
    best_goodputs,
    online_goodput,
)
from ringleader.perf.overlap import (
    ANCHOR_LIMIT,
    OverlapSpeed,
    anchored,
    fit_overlap,
    overlap_model,
)
from ringleader.policy.model.views import ClusterView, JobShape, JobView, Node, Observation
from ringleader.policy.profile.sources import Online
from tests.helpers import PER_EXAMPLE_MODEL

TRUE = (0.02, 0.001, 0.004, 0.0005, 0.06, 0.002, 2.0)
"""A job whose step crosses a node at a cost fifteen times that of syncing within one."""


def _truth(gpus: int, per_gpu: float, per_node: int = 4) -> float:
    return overlap_model(PER_EXAMPLE_MODEL, TRUE, per_node).step_time(gpus, per_gpu)


def test_the_model_sums_compute_and_sync_at_gamma_one_and_takes_the_slower_as_it_grows() -> None:
    summed = overlap_model(PER_EXAMPLE_MODEL, (0.01, 0.001, 0.02, 0.0, 0.05, 0.0, 1.0), 4)
    assert summed.step_time(1, 10.0) == pytest.approx(0.02)  # one GPU: no sync
    assert summed.step_time(4, 10.0) == pytest.approx(0.02 + 0.02)  # within a node
    assert summed.step_time(8, 10.0) == pytest.approx(0.02 + 0.05)  # across two
    maxed = overlap_model(PER_EXAMPLE_MODEL, (0.01, 0.001, 0.02, 0.0, 0.05, 0.0, 10.0), 4)
    assert maxed.step_time(8, 10.0) == pytest.approx(0.05, rel=1e-3)
    per_worker = np.asarray([10.0, 100.0])
    assert list(maxed.step_times(8, per_worker)) == pytest.approx(
        [maxed.step_time(8, 10.0), maxed.step_time(8, 100.0)]
    )


def test_a_fit_to_steps_on_one_and_two_nodes_predicts_a_count_and_batch_it_never_ran() -> None:
    seen = [(1, 32.0), (2, 64.0), (4, 48.0), (8, 128.0), (8, 40.0), (16, 96.0)]
    samples = [(k, _truth(k, m), m) for k, m in seen]
    fitted = overlap_model(PER_EXAMPLE_MODEL, fit_overlap(samples, 4), 4)
    for k, m in seen:
        assert fitted.step_time(k, m) == pytest.approx(_truth(k, m), rel=0.03)
    assert fitted.step_time(12, 80.0) == pytest.approx(_truth(12, 80.0), rel=0.1)


def test_a_share_past_what_a_gpu_holds_pays_the_compute_of_each_micro_batch() -> None:
    # 40 examples on a GPU that holds 16: three micro-batches of 40/3, the first two
    # computing only, the last overlapping its compute with the sync.
    model = overlap_model(PER_EXAMPLE_MODEL, (0.01, 0.001, 0.02, 0.0, 0.05, 0.0, 1.0), 4, 16)
    grad = 0.01 + 0.001 * 40 / 3
    assert model.step_time(4, 40.0) == pytest.approx(2 * grad + grad + 0.02)
    assert model.step_time(4, 16.0) == pytest.approx(0.01 + 0.016 + 0.02)  # one pass
    in_one = overlap_model(PER_EXAMPLE_MODEL, model.params, 4)
    assert in_one.step_time(4, 40.0) == pytest.approx(0.01 + 0.04 + 0.02)


def test_a_fit_to_accumulated_steps_predicts_a_larger_share_as_micro_batches() -> None:
    # The job ran at shares of 2-8 examples on GPUs that hold 8, and once at 16 (two
    # micro-batches); the constant part is paid once per micro-batch, and the fit
    # told so predicts 64 examples (eight micro-batches) it never ran.
    def truth(gpus: int, share: float) -> float:
        return overlap_model(PER_EXAMPLE_MODEL, TRUE, 4, 8).step_time(gpus, share)

    seen = [(1, 4.0), (2, 8.0), (4, 2.0), (8, 6.0), (8, 4.0), (4, 16.0)]
    samples = [(k, truth(k, m), m) for k, m in seen]
    fitted = overlap_model(PER_EXAMPLE_MODEL, fit_overlap(samples, 4, 8), 4, 8)
    assert fitted.step_time(4, 64.0) == pytest.approx(truth(4, 64.0), rel=0.05)
    blind = overlap_model(PER_EXAMPLE_MODEL, fit_overlap(samples, 4), 4)
    assert blind.step_time(4, 64.0) < 0.9 * truth(4, 64.0)  # the error this corrects


def test_the_fit_sees_the_jump_where_a_job_first_spans_two_nodes() -> None:
    # Counts 1, 2, 4 within a node and 8 across two, at one per-GPU batch: the step at
    # 8 is far slower than the trend within the node says, and the fit keeps that.
    samples = [(k, _truth(k, 32.0), 32.0) for k in (1, 2, 4, 8)]
    fitted = overlap_model(PER_EXAMPLE_MODEL, fit_overlap(samples, 4), 4)
    assert fitted.step_time(8, 32.0) == pytest.approx(_truth(8, 32.0), rel=0.03)
    assert fitted.step_time(8, 32.0) > 1.5 * fitted.step_time(4, 32.0)


def test_without_a_step_across_nodes_the_fit_takes_crossing_as_dearer_than_staying() -> None:
    # Pollux's prior: no multi-node step seen, so crossing costs at least 1.1x the
    # sync within a node, never less (and the node's own counts are as measured).
    samples = [(k, _truth(k, 32.0), 32.0) for k in (1, 2, 4)]
    fitted = overlap_model(PER_EXAMPLE_MODEL, fit_overlap(samples, 4), 4)
    _, _, alpha_r, beta_r, alpha_n, beta_n, _ = fitted.params
    assert alpha_n >= 1.1 * alpha_r - 1e-12 and beta_n >= 1.1 * beta_r - 1e-12
    assert fitted.step_time(4, 32.0) == pytest.approx(_truth(4, 32.0), rel=0.03)


@pytest.mark.parametrize(
    ("samples", "per_node"),
    [
        ([], 4),
        ([(1, 0.1, 32.0)], 0),
        ([(0, 0.1, 32.0)], 4),
        ([(1, float("nan"), 32.0)], 4),
        ([(1, -0.1, 32.0)], 4),
        ([(1, 0.1, 0.0)], 4),
    ],
)
def test_samples_that_support_no_fit_are_refused(
    samples: list[tuple[int, float, float]], per_node: int
) -> None:
    with pytest.raises(ModelFitError):
        fit_overlap(samples, per_node)


def _job(seen: dict[int, Observation], *, reports: bool) -> JobView:
    shape = JobShape(50_000, 32, 1e6, Algorithm.RING)
    job = JobView("a", 0.0, shape, EpochsToConverge.constant(10), observations=seen)
    if reports:
        job = dataclasses.replace(job, gradient=GradientReport(1e-3, 4.0, 32, 4096))
    return job


def test_the_online_profile_fits_the_overlap_model_only_where_it_is_told_for() -> None:
    twice = {k: Observation(_truth(k, 32.0), 60.0, 32.0) for k in (2, 8)}
    once = {2: twice[2]}
    # A job that adapts its batch, seen at two sizes, on a cluster of known nodes.
    model, measured = Online.plain_model(_job(twice, reports=True), 4)
    assert isinstance(model, OverlapSpeed) and measured and model.per_node == 4
    assert model.step_time(8, 32.0) == pytest.approx(_truth(8, 32.0), rel=0.05)
    # Not where it keeps its batch, was seen at one size, or the nodes are not known.
    assert not isinstance(Online.plain_model(_job(twice, reports=False), 4)[0], OverlapSpeed)
    assert not isinstance(Online.plain_model(_job(once, reports=True), 4)[0], OverlapSpeed)
    assert not isinstance(Online.plain_model(_job(twice, reports=True))[0], OverlapSpeed)


def test_a_split_lays_the_model_out_on_the_clusters_widest_node() -> None:
    cluster = ClusterView((Node("a", 4), Node("b", 8)))
    assert cluster.widest_node == 8 and ClusterView(()).widest_node == 0
    twice = {k: Observation(_truth(k, 32.0), 60.0, 32.0) for k in (2, 8)}
    (candidate,), _ = Online().split([_job(twice, reports=True)], cluster)
    speed = candidate.speed
    assert speed is not None and speed.goodput(8, 0.0) > 0  # type: ignore[attr-defined]
    model, _ = Online.plain_model(_job(twice, reports=True), cluster.widest_node)
    assert isinstance(model, OverlapSpeed) and model.per_node == 8


def test_an_anchored_fit_answers_as_measured_where_it_was_and_as_fitted_elsewhere() -> None:
    # Measured steps that no smooth curve goes through: 8 GPUs a third slower than the
    # model of the rest says, 2 GPUs six times slower (a step timed while restarting).
    steps = {k: _truth(k, 32.0) for k in (1, 4, 12, 16, 24)}
    steps[2], steps[8] = 6 * _truth(2, 32.0), 1.3 * _truth(8, 32.0)
    samples = tuple((k, s, 32.0) for k, s in steps.items())
    fitted = overlap_model(PER_EXAMPLE_MODEL, fit_overlap(samples, 4), 4)
    model = anchored(fitted, samples)
    assert model.step_time(8, 32.0) == pytest.approx(steps[8])
    assert fitted.step_time(8, 32.0) != pytest.approx(steps[8], rel=0.05)
    # At another batch, in proportion; at a count never measured, the fit as it was.
    assert model.step_time(8, 64.0) / fitted.step_time(8, 64.0) == pytest.approx(
        steps[8] / fitted.step_time(8, 32.0)
    )
    assert model.step_time(20, 32.0) == fitted.step_time(20, 32.0)
    # No further than ANCHOR_LIMIT from the fit.
    assert model.step_time(2, 32.0) <= ANCHOR_LIMIT * fitted.step_time(2, 32.0) * (1 + 1e-9)
    assert model.step_time(2, 32.0) < steps[2]


def test_every_count_at_once_is_each_count_asked_alone_to_the_bit() -> None:
    samples = tuple(
        (k, 1.2 * _truth(k, 32.0) if k == 8 else _truth(k, 32.0), 32.0) for k in (1, 4, 8)
    )
    model = anchored(overlap_model(PER_EXAMPLE_MODEL, fit_overlap(samples, 4), 4, 16), samples)
    report = GradientReport(1e-3, 4.0, 32, 4096, 16)
    together = best_goodputs(model, report, 48)
    assert together.tolist() == [best_goodput(model, report, k) for k in range(1, 49)]
    told = online_goodput(model, report)
    assert told.goodputs(5, 0.0).tolist() == together[:5].tolist()
    assert told.goodput(40, 0.0) == together[39]
    # A job whose smallest batch is more than a count may take gets nothing there.
    narrow = GradientReport(1e-3, 4.0, 32, 40, 16)
    assert best_goodputs(model, narrow, 48)[40:].tolist() == [0.0] * 8
