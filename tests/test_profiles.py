"""The simulator's built-in true profiles."""

from __future__ import annotations

import dataclasses

from ringleader.sim.profiles import RESNET110_FIT, RESNET110_K40


def test_the_kept_resnet110_fit_is_the_fit_of_its_step_times_to_the_bit() -> None:
    made = RESNET110_K40.fit()
    assert made == RESNET110_FIT
    assert made.theta == RESNET110_FIT.theta  # floats compared exactly, not approximately


def test_a_profile_without_a_kept_fit_fits_its_step_times() -> None:
    unfitted = dataclasses.replace(RESNET110_K40, fitted=None)
    assert unfitted.speed_model == RESNET110_K40.speed_model
    for workers in (1, 2, 3, 4, 8, 16, 32):
        assert unfitted.step_time(workers) == RESNET110_K40.step_time(workers)
