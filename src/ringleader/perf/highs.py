"""HiGHS, as scipy ships it: linear and integer programmes, imported when first solved.

The allot policies (Gavel's LP, Sia's ILP) solve one a round. ``scipy.optimize``
is imported here on the first solve, not with the policies: importing it took
0.3 s of every command that only lists them (``tests/test_nnls.py``).

HiGHS writes a line to stdout where it repairs an integer solution
(``HighsMipSolverData::transformNewIntegerFeasibleSolution``, HiGHS issue 2783;
22 lines in one run of ``bench/published.py``), whatever its options say: a
bare ``printf``. ``milp`` points file descriptor 1 at the null device for the
solve, so the line never reaches a simulation's output.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def linprog(*args: Any, **kwargs: Any) -> Any:
    """``scipy.optimize.linprog(..., method="highs")``."""
    from scipy.optimize import linprog as solve

    return solve(*args, method="highs", **kwargs)


def milp(*args: Any, **kwargs: Any) -> Any:
    """``scipy.optimize.milp``, with stdout silenced while it runs."""
    from scipy.optimize import milp as solve

    with quiet_stdout():
        return solve(*args, **kwargs)


@contextmanager
def quiet_stdout() -> Iterator[None]:
    """File descriptor 1 on the null device for the block (see the module docstring)."""
    sys.stdout.flush()
    saved = os.dup(1)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(null)
