"""``choose``'s problem solved exactly by a table, where a cluster's GPUs are few.

Each type's capacity is one axis of a table of the cheapest total cost of the
rows seen so far within that many GPUs of each type; a row adds the cheapest of
taking nothing or one of its options. 64 GPUs of three types (24, 20, 20) make
11,025 cells, and a row costs one array operation per option; HiGHS took 0.1 to
0.3 s on some decisions of 25 jobs there, proving its gap by branch and bound.
Past ``MAX_WORK`` the caller asks HiGHS.

An option is left out where it costs no less than one of the same type on
fewer GPUs (it can never be the better pick), and where it costs no less than
nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

MAX_WORK = 20_000_000
"""Table cells times options past which the table is not built (about 0.1 s of work)."""

Option = tuple[int, int]
"""(type's axis, GPUs)."""


def small_enough(capacity: Sequence[int], options: int) -> bool:
    """Whether a table for ``capacity`` over ``options`` options is within ``MAX_WORK``."""
    return math.prod(c + 1 for c in capacity) * options <= MAX_WORK


def undominated(cost: np.ndarray, options: Sequence[Option]) -> list[int]:
    """The options worth a look: cheaper than nothing, and than every option of their
    type on fewer GPUs (``options`` in any order)."""
    kept: list[int] = []
    cheapest: dict[int, list[tuple[int, float]]] = {}
    for k in sorted(range(len(options)), key=lambda k: (options[k][1], cost[k])):
        axis, gpus = options[k]
        price = float(cost[k])
        fewer = cheapest.setdefault(axis, [])
        if price >= 0.0 or any(g < gpus and p <= price for g, p in fewer):
            continue
        fewer.append((gpus, price))
        kept.append(k)
    return kept


def cheapest(
    costs: Sequence[np.ndarray], options: Sequence[Sequence[Option]], capacity: Sequence[int]
) -> list[int | None]:
    """Each row's pick (an index into its ``options``; None: nothing) of least total
    ``costs`` with each type's GPUs within ``capacity``; taking nothing costs 0."""
    shape = tuple(c + 1 for c in capacity)
    best = np.zeros(shape)
    choices: list[np.ndarray] = []
    for cost, opts in zip(costs, options, strict=True):
        new = best.copy()
        choice = np.full(shape, -1, dtype=np.int32)
        for k in undominated(cost, opts):
            axis, gpus = opts[k]
            if gpus > capacity[axis]:
                continue
            into = [slice(None)] * len(shape)
            into[axis] = slice(gpus, None)
            outof = [slice(None)] * len(shape)
            outof[axis] = slice(0, shape[axis] - gpus)
            taken = best[tuple(outof)] + cost[k]
            there = new[tuple(into)]
            better = taken < there
            there[better] = taken[better]
            choice[tuple(into)][better] = k
        best = new
        choices.append(choice)
    picks: list[int | None] = [None] * len(costs)
    left = list(capacity)
    for j in reversed(range(len(costs))):
        k = int(choices[j][tuple(left)])
        if k >= 0:
            picks[j] = k
            axis, gpus = options[j][k]
            left[axis] -= gpus
    return picks
