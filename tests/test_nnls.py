"""scipy's NNLS, loaded without scipy.optimize: the same numbers, to the bit."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from scipy.optimize import nnls as scipy_nnls

from ringleader.perf import nnls as fast


def test_the_compiled_routine_alone_answers_as_scipy_optimize_to_the_bit() -> None:
    solve = fast.compiled_solver()
    assert solve is not None, "this scipy keeps NNLS elsewhere: every fit imports scipy.optimize"
    rng = np.random.default_rng(7)
    for trial in range(300):
        m, n = int(rng.integers(2, 12)), int(rng.integers(1, 6))
        a = rng.normal(size=(m, n)) * rng.choice([1e-3, 1.0, 1e3], size=n)
        if trial % 5 == 0:
            a[:, -1] = a[:, 0]  # rank-deficient
        b = rng.normal(size=m)
        x, rnorm = solve(a, b)
        want_x, want_rnorm = scipy_nnls(a, b)
        assert x.tobytes() == want_x.tobytes() and rnorm == want_rnorm, (trial, x, want_x)
        assert (x >= 0).all()


def test_a_bad_problem_gets_scipys_own_error() -> None:
    solve = fast.compiled_solver()
    assert solve is not None
    with pytest.raises(ValueError):
        solve(np.ones((3, 2)), np.ones(4))
    with pytest.raises(ValueError):
        solve(np.array([[np.nan, 1.0]]), np.ones(1))


def test_fitting_a_speed_model_does_not_import_scipy_optimize() -> None:
    # Importing it was 0.28 s of a simulation under any policy that fits online.
    code = (
        "import sys\n"
        "from ringleader.sim.profiles import RESNET110_K40 as p\n"
        "m = p.fit()\n"
        "assert m.theta == p.fitted.theta, (m.theta, p.fitted.theta)\n"
        "print('scipy.optimize' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
