"""The simulator's built-in true profiles."""

from __future__ import annotations

import dataclasses
import math

from ringleader.sim.profiles import RESNET110_FIT, RESNET110_K40

FIT_REL_TOL = 1e-9
"""How far a fit made here may be from the kept one. The fit's numpy kernels round
differently on different CPUs: an AMD EPYC's fit of Table 1 differs from the kept one
by 2e-12, relative, in each nonzero parameter. A stale fit (other step times, another
shape) differs in the third digit. Simulations use the kept fit, so they do not
depend on the CPU."""


def close(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return len(a) == len(b) and all(
        math.isclose(x, y, rel_tol=FIT_REL_TOL, abs_tol=1e-15) for x, y in zip(a, b, strict=True)
    )


def test_the_kept_resnet110_fit_is_the_fit_of_its_step_times() -> None:
    made = RESNET110_K40.fit()
    assert close(made.theta, RESNET110_FIT.theta), (made.theta, RESNET110_FIT.theta)
    # Everything but the parameters is equal exactly.
    assert dataclasses.replace(made, theta=RESNET110_FIT.theta) == RESNET110_FIT
    # A fit of other step times is told apart.
    other = dataclasses.replace(RESNET110_K40, step_times={1: 0.4025, 2: 0.43, 4: 0.45, 8: 0.48})
    assert not close(other.fit().theta, RESNET110_FIT.theta)


def test_a_profile_without_a_kept_fit_fits_its_step_times() -> None:
    unfitted = dataclasses.replace(RESNET110_K40, fitted=None)
    assert close(unfitted.speed_model.theta, RESNET110_K40.speed_model.theta)
    for workers in (1, 2, 3, 4, 8, 16, 32):
        assert math.isclose(
            unfitted.step_time(workers), RESNET110_K40.step_time(workers), rel_tol=FIT_REL_TOL
        )
