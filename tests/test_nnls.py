"""scipy's NNLS, loaded without scipy.optimize: the same numbers, to the bit."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import scipy
from scipy.optimize import nnls as scipy_nnls

from ringleader.perf import nnls as fast

VERIFIED = (1, 17)
"""The scipy release whose layout ``perf.nnls`` was checked on: from it on, the routine
must load alone; an older scipy may keep it elsewhere (fits then import scipy.optimize:
slower, the same numbers)."""


def _solver() -> fast.Solve:
    solve = fast.compiled_solver()
    if solve is None and tuple(int(p) for p in scipy.__version__.split(".")[:2]) < VERIFIED:
        pytest.skip(f"scipy {scipy.__version__} keeps NNLS elsewhere: fits use scipy.optimize")
    assert solve is not None, "NNLS did not load alone: every fit imports scipy.optimize"
    return solve


def test_the_compiled_routine_alone_answers_as_scipy_optimize_to_the_bit() -> None:
    solve = _solver()
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
    solve = _solver()
    with pytest.raises(ValueError):
        solve(np.ones((3, 2)), np.ones(4))
    with pytest.raises(ValueError):
        solve(np.array([[np.nan, 1.0]]), np.ones(1))


def test_fitting_a_speed_model_does_not_import_scipy_optimize() -> None:
    # Importing it was 0.28 s of a simulation under any policy that fits online.
    _solver()
    code = (
        "import sys\n"
        "from ringleader.sim.profiles import RESNET110_K40 as p\n"
        "m = p.fit()\n"
        # Within the CPU's rounding of the fit (``test_profiles.FIT_REL_TOL``).
        "import math\n"
        "assert all(math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-15)"
        " for x, y in zip(m.theta, p.fitted.theta)), (m.theta, p.fitted.theta)\n"
        "print('scipy.optimize' in sys.modules)\n"
        # scipy.optimize imported after the routine was loaded alone still works, SLSQP
        # (the routine's own module) included, and answers as before.
        "import numpy as np\n"
        "from scipy.optimize import minimize, nnls\n"
        "from ringleader.perf.nnls import nnls as ours\n"
        "a, b = np.array([[1.0, 2.0], [3.0, 1.0], [0.5, 4.0]]), np.array([1.0, -2.0, 3.0])\n"
        "assert ours(a, b)[0].tobytes() == nnls(a, b)[0].tobytes()\n"
        "print(round(float(minimize(lambda v: (v[0] - 1) ** 2, [0.0], method='SLSQP').x[0]), 6))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "1.0"]
