"""Non-negative least squares: scipy's, without importing ``scipy.optimize``.

Every speed model is an NNLS fit (``perf.speed``), and a policy that learns
models online (the default, ``elastic``, exploratory profiling) fits one in
its first decisions. ``scipy.optimize.nnls`` is the implementation we trust,
but importing ``scipy.optimize`` runs the whole package's ``__init__``, which
imports ``scipy.linalg``, ``scipy.sparse`` and the rest: 0.28 s of every
simulation under those policies (ITP cluster07 under the default takes about
4 s in all), for a routine that takes microseconds a fit.

Where the installed scipy keeps the routine in a compiled module of its own
(``_slsqplib.nnls``, as scipy 1.17 does), that module is loaded alone and
called exactly as ``scipy.optimize.nnls`` calls it, so the numbers are
scipy's to the bit (``tests/test_nnls.py`` compares them). It must first
solve a small problem right; anything else (another layout, a failed load,
``scipy.optimize`` imported already) takes ``scipy.optimize.nnls``.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

Solve = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, float]]

_PROBE_A = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
_PROBE_B = np.array([2.0, 1.0, -1.0])
"""A problem whose answer is known: x = (1.5, 0), the second held at zero, and the
residual's norm the square root of 1.5."""


def nnls(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, float]:
    """``argmin ||a x - b||`` over ``x >= 0``, and the residual's norm, as
    ``scipy.optimize.nnls(a, b)`` gives them."""
    return _solver()(a, b)


def _public(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, float]:
    from scipy.optimize import nnls as solve  # here: see the module docstring

    x, rnorm = solve(a, b)
    return x, float(rnorm)


@cache
def _solver() -> Solve:
    if "scipy.optimize" in sys.modules:
        return _public  # paid for already: nothing to save
    return compiled_solver() or _public


def compiled_solver() -> Solve | None:
    """scipy's compiled routine, loaded alone and checked on a known problem; None where
    this scipy keeps it elsewhere or it does not answer right."""
    try:
        routine = _compiled()
    except Exception:  # another layout, or a failed load: the public routine
        return None
    if routine is None:
        return None

    def solve(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, float]:
        # As scipy.optimize.nnls (1.17) prepares its arguments and reads the answer.
        a = np.asarray_chkfinite(a, dtype=np.float64, order="C")
        b = np.asarray_chkfinite(b, dtype=np.float64)
        if a.ndim != 2 or b.ndim != 1 or a.shape[0] != b.shape[0]:
            return _public(a, b)  # its own clear errors
        x, rnorm, info = routine(a, b, 3 * a.shape[1])
        if info == 3:
            raise RuntimeError("Maximum number of iterations reached.")
        return x, float(rnorm)

    try:
        x, rnorm = solve(_PROBE_A, _PROBE_B)
        right = (
            x.shape == (2,)
            and abs(float(x[0]) - 1.5) < 1e-12
            and float(x[1]) == 0.0
            and abs(rnorm - 1.5**0.5) < 1e-12
        )
    except Exception:
        right = False
    return solve if right else None


def _compiled() -> Callable[..., Any] | None:
    """scipy's compiled ``nnls`` routine, loaded without ``scipy.optimize``; None if
    this scipy keeps it elsewhere."""
    spec = importlib.util.find_spec("scipy")
    if spec is None or spec.origin is None:
        return None
    for path in sorted((Path(spec.origin).parent / "optimize").glob("_slsqplib.*")):
        if path.suffix not in (".so", ".pyd"):
            continue
        found = importlib.util.spec_from_file_location("scipy.optimize._slsqplib", path)
        if found is None or found.loader is None:
            return None
        module = importlib.util.module_from_spec(found)
        found.loader.exec_module(module)
        routine = getattr(module, "nnls", None)
        return routine if callable(routine) else None
    return None
