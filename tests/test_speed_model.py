import math

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from ringleader.perf import Algorithm, ModelFitError, SpeedModel, StepSample, fit_speed_model

N = 50_000
GRAD = 7e6

theta_st = st.tuples(
    st.floats(1e-4, 1e-2),  # s per example
    st.floats(1e-5, 1e-2),  # s per message
    st.floats(1e-11, 1e-8),  # s per byte sent
    st.floats(1e-11, 1e-8),  # s per byte reduced
    st.floats(1e-3, 0.5),  # constant
)


def _truth(theta: tuple[float, float, float, float, float], algorithm: Algorithm) -> SpeedModel:
    return SpeedModel(theta, algorithm, GRAD, 128, N)


@given(theta=theta_st)
def test_fit_recovers_coefficients_from_noiseless_samples(
    theta: tuple[float, float, float, float, float],
) -> None:
    truth = _truth(theta, Algorithm.BINARY_BLOCKS)
    samples = [
        StepSample(w, truth.step_time(w, m), m)
        for w in (1, 2, 3, 4, 5, 8, 9, 12)
        for m in (64, 128)
    ]
    fit = fit_speed_model(samples, grad_bytes=GRAD, examples_per_epoch=N, batch_per_worker=128)
    assert fit.identifiable
    for got, want in zip(fit.theta, theta, strict=True):
        assert got == pytest.approx(want, rel=0.01)


@given(theta=theta_st, algorithm=st.sampled_from([Algorithm.BINARY_BLOCKS, Algorithm.MPICH]))
def test_per_gpu_speed_from_8_to_9_is_worse_than_from_8_to_16(
    theta: tuple[float, float, float, float, float], algorithm: Algorithm
) -> None:
    model = _truth(theta, algorithm)
    per_gpu = {w: model.epochs_per_second(w) / w for w in (8, 9, 16)}
    assert per_gpu[9] < per_gpu[16]
    assert per_gpu[9] < per_gpu[8]


def test_fixed_batch_samples_are_rank_deficient_but_still_predict_them() -> None:
    table1 = {1: 0.4025, 2: 0.4272, 4: 0.4443, 8: 0.4702}
    samples = [StepSample(w, t, 128) for w, t in table1.items()]
    fit = fit_speed_model(samples, grad_bytes=GRAD, examples_per_epoch=N)
    assert not fit.identifiable
    for w, t in table1.items():
        assert fit.step_time(w) == pytest.approx(t, rel=0.01)
    assert all(math.isfinite(v) and v >= 0 for v in fit.theta)


def test_one_worker_count_is_not_enough() -> None:
    with pytest.raises(ModelFitError, match="two or more worker counts"):
        fit_speed_model(
            [StepSample(4, 0.4, 128), StepSample(4, 0.41, 128)],
            grad_bytes=GRAD,
            examples_per_epoch=N,
        )


def test_no_samples_is_a_clear_error() -> None:
    with pytest.raises(ModelFitError, match="no step-time samples"):
        fit_speed_model([], grad_bytes=GRAD, examples_per_epoch=N)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 0.0, -1.0])
def test_bad_step_times_name_the_sample(bad: float) -> None:
    with pytest.raises(ModelFitError, match="sample 1: step_time"):
        fit_speed_model(
            [StepSample(1, 0.4, 128), StepSample(2, bad, 128)],
            grad_bytes=GRAD,
            examples_per_epoch=N,
        )


def test_samples_without_one_worker_that_hide_the_compute_time_are_refused() -> None:
    # T(4) = 2·T(2) exactly: NNLS can put everything into latency, leaving T(1) = 0.
    with pytest.raises(ModelFitError, match="add a sample at 1 worker"):
        fit_speed_model(
            [StepSample(2, 0.2, 128), StepSample(4, 0.4, 128)],
            grad_bytes=GRAD,
            examples_per_epoch=N,
            algorithm=Algorithm.HALVING_DOUBLING,
        )


@given(
    times=st.lists(st.floats(1e-3, 10.0), min_size=2, max_size=6),
    sizes=st.lists(st.integers(1, 64), min_size=2, max_size=6, unique=True),
)
def test_any_positive_samples_give_a_finite_model_or_a_clear_error(
    times: list[float], sizes: list[int]
) -> None:
    assume(len(times) >= len(sizes))
    samples = [StepSample(w, t, 128) for w, t in zip(sizes, times, strict=False)]
    try:
        fit = fit_speed_model(samples, grad_bytes=GRAD, examples_per_epoch=N)
    except ModelFitError as err:
        assert str(err)
        return
    for w in (1, 2, 3, 8, 9, 16, 100):
        speed = fit.epochs_per_second(w)
        assert math.isfinite(speed) and speed > 0


def test_step_times_over_an_array_are_step_time_float_for_float() -> None:
    """The goodput stage weighs fifty batches per count at once; it must be told what
    one call per batch would have said, measured points included."""
    import numpy as np

    from ringleader.perf.goodput import TRIED, tried_batches
    from ringleader.perf.speed import with_measurements

    base = SpeedModel(
        theta=(0.003, 0.001, 2e-10, 1e-10, 0.02),
        algorithm=Algorithm.RING,
        grad_bytes=7e6,
        batch_per_worker=32,
        examples_per_epoch=50_000,
    )
    measured = with_measurements(base, {1: 0.11, 4: 0.2})
    for model in (base, measured):
        for workers in (1, 2, 3, 4, 8):
            shares = np.concatenate([tried_batches(8, 4096) / workers, [32.0]])
            got = model.step_times(workers, shares)
            assert got.tolist() == [model.step_time(workers, m) for m in shares.tolist()]
    assert measured.step_times(4, np.array([32.0]))[0] == 0.2  # the measurement answers
    assert np.array_equal(tried_batches(3, 700), np.geomspace(3, 700, TRIED))
