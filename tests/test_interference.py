import pytest

from ringleader.perf.interference import UnknownJobType, load_interference


def test_a_measured_pair_from_the_table() -> None:
    model = load_interference("v100")
    fa, fb = model.speeds("ResNet-18 (batch size 16)", "ResNet-50 (batch size 64)")
    assert fa == pytest.approx(20.365558661109052 / 32.353384328946916)
    assert fb == pytest.approx(4.0687113803879855 / 4.394774823323071)
    assert model.gain("ResNet-18 (batch size 16)", "ResNet-50 (batch size 64)") > 1.5


def test_every_pair_is_consistent_both_ways_and_slows_down() -> None:
    model = load_interference()
    types = model.job_types
    assert len(types) >= 20
    infeasible = 0
    for a in types:
        for b in types:
            fa, fb = model.speeds(a, b)
            assert 0.0 <= fa <= 1.0 and 0.0 <= fb <= 1.0
            assert model.speeds(b, a) == pytest.approx((fb, fa))
            assert model.fits(a, b) == (fa > 0 and fb > 0) == model.fits(b, a)
            infeasible += not model.fits(a, b)
    assert 0 < infeasible < len(types) ** 2 // 2


def test_some_packings_help_and_some_hurt() -> None:
    model = load_interference()
    gains = [model.gain(a, b) for a in model.job_types for b in model.job_types]
    assert max(gains) > 1.3 and min(gains) < 1.0


def test_unknown_types_name_the_known_ones() -> None:
    with pytest.raises(UnknownJobType, match="known: A3C"):
        load_interference().speeds("Mystery", "A3C")
    with pytest.raises(UnknownJobType, match="k80"):
        load_interference("h100")
