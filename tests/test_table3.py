"""The Table 3 acceptance: our reproduction against the seed's numbers (10 seeds)."""

import pytest

from ringleader.scenarios.table3 import LOADS, PAPER_HOURS, STRATEGIES, Table3, run_table3

FIXED = ("eight", "four", "two", "one")
# Our one known miss, explained in docs/table3.md: the seed's Eight column under
# contention is slower than 8 slots of 1.4 h jobs can be at the stated load.
KNOWN_MISS = {("eight", "moderate")}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def table() -> Table3:
    return run_table3(10)


def _paper_ratio(strategy: str, load: str) -> float:
    return PAPER_HOURS[strategy][load] / PAPER_HOURS["precompute"][load]


CELLS = [
    (s, load)
    for load in ("moderate", "none")
    for s in STRATEGIES[1:]
    if (s, load) not in KNOWN_MISS
]


@pytest.mark.parametrize(("strategy", "load"), CELLS)
def test_ratio_to_precompute_within_30_percent_of_the_papers(
    table: Table3, strategy: str, load: str
) -> None:
    ours, paper = table.ratio(strategy, load), _paper_ratio(strategy, load)
    assert 0.7 * paper <= ours <= 1.3 * paper, f"{strategy}/{load}: {ours:.2f} vs {paper:.2f}"


@pytest.mark.xfail(strict=True, reason="seed's Eight/moderate exceeds what its job model allows")
@pytest.mark.parametrize(("strategy", "load"), sorted(KNOWN_MISS))
def test_known_miss_still_misses(table: Table3, strategy: str, load: str) -> None:
    ours, paper = table.ratio(strategy, load), _paper_ratio(strategy, load)
    assert 0.7 * paper <= ours <= 1.3 * paper


@pytest.mark.parametrize("load", list(LOADS))
@pytest.mark.parametrize("fixed", FIXED)
def test_precompute_is_no_worse_than_a_fixed_size_beyond_the_ci(
    table: Table3, load: str, fixed: str
) -> None:
    slack = table.ci95("precompute", load) + table.ci95(fixed, load)
    assert table.mean("precompute", load) <= table.mean(fixed, load) + slack


def test_json_has_the_documented_shape(table: Table3) -> None:
    data = table.as_json()
    assert data["units"] == "hours" and data["seeds"] == 10
    for key in ("ours", "paper", "ci95"):
        grid = data[key]
        assert isinstance(grid, dict) and set(grid) == set(STRATEGIES)
        for row in grid.values():
            assert set(row) == {"extreme", "moderate", "none"}


def test_the_none_column_is_the_solo_time_of_each_fixed_size(table: Table3) -> None:
    for s in ("four", "two", "one"):
        assert table.mean(s, "none") == pytest.approx(PAPER_HOURS[s]["none"], abs=0.01)
