import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringleader.perf.allreduce import Algorithm, allreduce_cost

ALL = list(Algorithm)


@pytest.mark.parametrize("algorithm", ALL)
def test_a_single_worker_exchanges_nothing(algorithm: Algorithm) -> None:
    cost = allreduce_cost(algorithm, 1)
    assert (cost.latency, cost.transfer, cost.reduce) == (0.0, 0.0, 0.0)


def test_ring_matches_the_textbook_formula() -> None:
    p, n, alpha, beta, gamma = 6, 1e6, 1e-5, 1e-9, 2e-10
    expected = 2 * (p - 1) * alpha + 2 * (p - 1) / p * n * beta + (p - 1) / p * n * gamma
    assert allreduce_cost(Algorithm.RING, p).seconds(alpha, beta, gamma, n) == pytest.approx(
        expected
    )


def test_halving_doubling_pays_log_latency() -> None:
    cost = allreduce_cost(Algorithm.HALVING_DOUBLING, 16)
    assert cost.latency == pytest.approx(2 * 4)
    assert cost.transfer == pytest.approx(2 * 15 / 16)
    assert cost.reduce == pytest.approx(15 / 16)


def test_halving_doubling_refuses_non_powers_of_two() -> None:
    with pytest.raises(ValueError, match="binary-blocks"):
        allreduce_cost(Algorithm.HALVING_DOUBLING, 12)


def test_mpich_fold_is_halving_doubling_plus_the_fold() -> None:
    hd8 = allreduce_cost(Algorithm.HALVING_DOUBLING, 8)
    c = allreduce_cost(Algorithm.MPICH, 11)
    assert (c.latency, c.transfer, c.reduce) == pytest.approx(
        (hd8.latency + 2, hd8.transfer + 2, hd8.reduce + 1)
    )


def test_binary_blocks_prefers_blocks_of_similar_size() -> None:
    # 12 = 8 + 4 folds a big block; 9 = 8 + 1 folds a lone rank's whole vector.
    nine = allreduce_cost(Algorithm.BINARY_BLOCKS, 9)
    twelve = allreduce_cost(Algorithm.BINARY_BLOCKS, 12)
    assert twelve.transfer < nine.transfer
    assert twelve.transfer < allreduce_cost(Algorithm.MPICH, 12).transfer


@pytest.mark.parametrize("algorithm", ALL)
def test_rejects_zero_workers(algorithm: Algorithm) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        allreduce_cost(algorithm, 0)


@given(
    p=st.integers(2, 4096),
    algorithm=st.sampled_from([Algorithm.RING, Algorithm.MPICH, Algorithm.BINARY_BLOCKS]),
)
def test_coefficients_are_finite_and_positive(p: int, algorithm: Algorithm) -> None:
    cost = allreduce_cost(algorithm, p)
    for value in (cost.latency, cost.transfer, cost.reduce):
        assert math.isfinite(value) and value > 0
