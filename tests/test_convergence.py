import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringleader.perf import ConvergenceModel, ModelFitError, fit_convergence


@given(
    b0=st.floats(1e-5, 1e-2),
    b1=st.floats(0.2, 5.0),
    b2=st.floats(0.0, 1.0),
)
def test_fit_recovers_the_curve_from_noiseless_samples(b0: float, b1: float, b2: float) -> None:
    truth = ConvergenceModel((b0, b1, b2))
    steps = [float(k) for k in range(0, 20_000, 400)]
    fit = fit_convergence(steps, [truth.loss(k) for k in steps])
    for got, want in zip(fit.beta, (b0, b1, b2), strict=True):
        assert got == pytest.approx(want, rel=0.01, abs=1e-6)


def test_remaining_steps_count_down_to_convergence() -> None:
    model = ConvergenceModel((2e-4, 0.5, 0.3))
    end = model.converged_at(steps_per_epoch=390, threshold=1e-3)
    assert end > 0
    assert model.remaining_steps(end - 100, 390, 1e-3) == pytest.approx(100)
    assert model.remaining_steps(end + 5, 390, 1e-3) == 0
    # Just past the point, one more epoch improves the loss by less than the threshold.
    assert model.loss(end) - model.loss(end + 390) == pytest.approx(1e-3, rel=1e-6)


def test_flat_curve_means_nothing_left_to_gain() -> None:
    fit = fit_convergence([0, 100, 200, 300], [1.0, 1.0, 1.0, 1.0])
    assert fit.remaining_steps(300, 10, 1e-3) == 0


def test_too_few_points_is_a_clear_error() -> None:
    with pytest.raises(ModelFitError, match="3 or more distinct steps"):
        fit_convergence([0, 0, 10], [2.0, 2.0, 1.0])


@pytest.mark.parametrize("bad", [math.nan, math.inf, -0.5])
def test_bad_losses_are_rejected(bad: float) -> None:
    with pytest.raises(ModelFitError, match="losses must be finite"):
        fit_convergence([0, 1, 2, 3], [2.0, 1.5, bad, 1.0])


def test_later_samples_can_be_weighted_more() -> None:
    truth = ConvergenceModel((1e-3, 1.0, 0.2))
    steps = [float(k) for k in range(0, 5000, 100)]
    losses = [truth.loss(k) for k in steps]
    losses[0] += 0.5  # a noisy start
    flat = fit_convergence(steps, losses, recency_weight=0.0)
    recent = fit_convergence(steps, losses, recency_weight=10.0)
    late = steps[-1]
    assert abs(recent.loss(late) - truth.loss(late)) <= abs(flat.loss(late) - truth.loss(late))
