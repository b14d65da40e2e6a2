import pytest

from ringleader.perf import EpochsToConverge


def test_measured_points_are_returned_exactly() -> None:
    curve = EpochsToConverge.from_mapping({1: 146, 2: 157, 4: 183, 8: 220})
    assert [curve.at(w) for w in (1, 2, 4, 8)] == [146, 157, 183, 220]


def test_interpolates_in_log2_and_extrapolates_the_last_slope() -> None:
    curve = EpochsToConverge.from_mapping({4: 180, 8: 220})
    assert curve.at(16) == pytest.approx(260)
    assert curve.at(1) == 180  # never below the smallest measured value
    assert 180 < curve.at(6) < 220


def test_constant_and_scaled() -> None:
    assert EpochsToConverge.constant(90).at(64) == 90
    assert EpochsToConverge.constant(90).scaled(2).at(3) == 180


def test_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        EpochsToConverge(())
    with pytest.raises(ValueError):
        EpochsToConverge(((1, -3.0),))
