"""A running job's ETA, from its own (hostile) reports: right when sane, absent when not."""

from __future__ import annotations

import json

import pytest

from ringleader.runtime.state.eta import eta_s
from ringleader.runtime.state.rows import JobRow, State
from ringleader.runtime.state.spec import parse_spec


def _row(step_time: float, batch: float, examples: float, state: State = State.RUNNING) -> JobRow:
    spec = parse_spec({"name": "j", "command": ["true"], "epochs": 10})
    row = JobRow("j-1", 1, spec, state, 0.0, workers=2, epoch=4.0)
    row.observations = {"2": [step_time, 30.0, 100.0, batch]}
    row.shape = {"examples_per_epoch": examples}
    return row


def test_eta_is_the_epochs_left_at_the_measured_speed() -> None:
    # 2 workers × 32 examples per 0.5 s step: 128 examples/s; 6 epochs of 1280 left: 60 s.
    assert eta_s(_row(0.5, 32, 1280)) == pytest.approx(60.0)
    assert eta_s(_row(0.5, 32, 1280, state=State.SUSPENDED)) is None
    unmeasured = _row(0.5, 32, 1280)
    unmeasured.observations = {}
    assert eta_s(unmeasured) is None


@pytest.mark.parametrize(
    ("step_time", "batch", "examples"),
    [(1e-300, 1e12, 1e-300), (1e6, 1e-300, 1e15), (0.5, 0.0, 1280), (0.5, 32, 0.0)],
)
def test_absurd_reports_give_no_eta_never_a_number_json_cannot_carry(
    step_time: float, batch: float, examples: float
) -> None:
    eta = eta_s(_row(step_time, batch, examples))
    json.dumps(eta, allow_nan=False)  # raises for inf or nan
