"""The exact table beside ``choose``'s ILP: the same problem, its best answer.

``allot._table.cheapest`` answers the typed default's ILP where the cluster is
small; these tests hold it to every answer's cost, enumerated, and to HiGHS
solved to no gap, and check that ``choose`` gives the table's answer only when
asked and only where the table fits.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from ringleader.policy.allot import _table
from ringleader.policy.allot.configurations import choose
from ringleader.policy.allot.stage import Allotment
from ringleader.policy.model.views import ClusterView, Node

Option = tuple[int, int]


def _problem(
    seed: int,
) -> tuple[list[np.ndarray], list[list[Option]], list[int]]:
    rng = np.random.default_rng(seed)
    capacity = [int(c) for c in rng.integers(1, 7, size=rng.integers(1, 4))]
    costs, options = [], []
    for _ in range(int(rng.integers(1, 6))):
        count = int(rng.integers(1, 5))
        options.append(
            [(int(rng.integers(len(capacity))), int(rng.integers(1, 6))) for _ in range(count)]
        )
        costs.append(rng.normal(-0.5, 1.0, count))
    return costs, options, capacity


def _spent(
    picks: tuple[int | None, ...] | list[int | None],
    costs: list[np.ndarray],
    options: list[list[Option]],
    capacity: list[int],
) -> tuple[float, bool]:
    """The picks' total cost, and whether each type's GPUs hold them."""
    used = [0] * len(capacity)
    total = 0.0
    for pick, opts, cost in zip(picks, options, costs, strict=True):
        if pick is not None:
            used[opts[pick][0]] += opts[pick][1]
            total += float(cost[pick])
    return total, all(u <= c for u, c in zip(used, capacity, strict=True))


def _enumerated(costs: list[np.ndarray], options: list[list[Option]], capacity: list[int]) -> float:
    """The least total cost over every pick of each row (None: nothing), by brute force."""
    least = 0.0
    for picks in itertools.product(*[[None, *range(len(o))] for o in options]):
        total, fits = _spent(picks, costs, options, capacity)
        if fits:
            least = min(least, total)
    return least


@pytest.mark.parametrize("seed", range(60))
def test_the_table_finds_the_least_cost_every_answer_could_have(seed: int) -> None:
    costs, options, capacity = _problem(seed)
    total, fits = _spent(_table.cheapest(costs, options, capacity), costs, options, capacity)
    assert fits
    assert total == pytest.approx(_enumerated(costs, options, capacity), abs=1e-12)


def test_an_option_no_cheaper_than_fewer_gpus_of_its_type_or_than_nothing_is_left_out() -> None:
    cost = np.asarray([-1.0, -1.0, -2.0, 0.5, -0.9])
    options = [(0, 1), (0, 2), (0, 4), (1, 1), (1, 2)]
    # 2 GPUs cost what 1 does; nothing beats a positive cost; type 1's 2 are alone there
    assert sorted(_table.undominated(cost, options)) == [0, 2, 4]


def test_choose_gives_the_tables_answer_only_where_asked_and_small(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cluster = ClusterView(
        (
            Node("a0", 4, gpu_type="fast"),
            Node("b0", 2, gpu_type="slow"),
            Node("b1", 2, gpu_type="slow"),
        )
    )
    offered = [
        Allotment("fast", 1),
        Allotment("fast", 4),
        Allotment("slow", 2),
        Allotment("slow", 4),
    ]
    rng = np.random.default_rng(7)
    rows, costs = [], []
    for j in range(6):
        options = [i for i in range(len(offered)) if rng.random() < 0.8] or [0]
        rows.append((j, options, np.ones(len(options)), None))
        costs.append(-rng.random(len(options)))
    tabled: list[int] = []
    cheapest = _table.cheapest

    def counted(*args: object) -> list[int | None]:
        tabled.append(1)
        return cheapest(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(_table, "cheapest", counted)

    def total(picks: list[int | None]) -> float:
        return sum(
            float(c[r[1].index(p)])
            for p, r, c in zip(picks, rows, costs, strict=True)
            if p is not None
        )

    by_ilp = choose(rows, costs, offered, cluster, 0.0)  # type: ignore[arg-type]
    assert not tabled  # not asked: HiGHS
    exact = choose(rows, costs, offered, cluster, 0.0, exact_when_small=True)  # type: ignore[arg-type]
    assert len(tabled) == 1
    assert total(exact) <= total(by_ilp) + 1e-12
    assert total(exact) == pytest.approx(total(by_ilp), rel=1e-3)  # HiGHS's gap is 1e-4
    monkeypatch.setattr(_table, "MAX_WORK", 10)  # too big for the table now: HiGHS
    past = choose(rows, costs, offered, cluster, 0.0, exact_when_small=True)  # type: ignore[arg-type]
    assert len(tabled) == 1 and total(past) == pytest.approx(total(by_ilp), rel=1e-3)


def test_past_its_work_bound_the_table_says_it_is_not_small_enough() -> None:
    assert _table.small_enough([24, 20, 20], 500)
    assert not _table.small_enough([86, 85, 85], 100)
