"""The policy ``ringleader simulate`` plays: a named policy with the flags' settings,
over a workload file's."""

from __future__ import annotations

from typing import Any

from ringleader.cli.errors import fail
from ringleader.inputs import parse_thresholds, thresholds_problem
from ringleader.policy.catalog import UnknownPolicyError
from ringleader.policy.model.plan import Decider


def policy_for(
    name: str, quantum_s: float | None, thresholds: str | None, file_settings: Any
) -> Decider:
    """The policy ``name`` with the settings given (flags over the workload file's)."""
    from ringleader.policy.catalog import SettingNotUsed, policy_from_config

    flagged: tuple[float, ...] | None = None
    if thresholds is not None:
        try:
            flagged = parse_thresholds(thresholds)
        except ValueError as err:
            fail(f"--tiresias-thresholds: {err}")
    try:
        # A flag names a knob the policy must have; a file's settings serve every policy
        # it is run with, so they apply where they can.
        policy_from_config(name, None, quantum_s, flagged, strict=True)
    except UnknownPolicyError as err:
        fail(f"--policy: {err}")
    except SettingNotUsed as err:
        fail(str(err))
    levels = flagged
    if levels is None and file_settings is not None:
        given = file_settings.tiresias_thresholds_gpu_s
        levels = None if given is None else tuple(given)
        if levels is not None:
            _check_levels("simulation.tiresias_thresholds_gpu_s", levels)
    weights = None
    if file_settings is not None:
        weights = file_settings.user_weights
        if quantum_s is None:
            quantum_s = file_settings.quantum_s
    return policy_from_config(name, None, quantum_s, levels, user_weights=weights)


def _check_levels(where: str, levels: tuple[float, ...]) -> None:
    problem = thresholds_problem(levels)
    if problem is not None:
        fail(f"{where}: {problem}")
