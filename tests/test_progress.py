"""Folding a job's progress lines into its row (``runtime.progress``)."""

from __future__ import annotations

import json
from pathlib import Path

from ringleader.runtime.control.progress import WARMUP_STEPS, ProgressIngest
from ringleader.runtime.state.rows import JobRow, State
from ringleader.runtime.state.spec import parse_spec


def _row(generation: int = 1, workers: int = 2) -> JobRow:
    spec = parse_spec({"name": "p", "command": ["true"]})
    row = JobRow("p-1", 1, spec, State.RUNNING, 0.0, state_since=0.0)
    row.generation, row.workers = generation, workers
    return row


def _write(path: Path, *records: dict[str, object], raw: str = "") -> None:
    with path.open("a") as f:
        for rec in records:
            f.write(json.dumps(rec) + "\n")
        f.write(raw)


def test_steps_after_the_warm_up_make_the_profile_alone_and_packed(tmp_path: Path) -> None:
    path = tmp_path / "progress.jsonl"
    row, ingest = _row(), ProgressIngest(1 << 20)
    steps = [
        {
            "g": 1,
            "step": s,
            "epoch": s / 10,
            "loss": 2.0 - s / 10,
            "step_time": 0.5,
            "world_size": 2,
            "batch_per_worker": 32,
        }
        for s in range(1, WARMUP_STEPS + 4)
    ]
    _write(path, {"g": 0, "step": 99, "step_time": 9.0}, *steps)  # gen 0: an old run's
    ingest.ingest(row, path)
    assert row.step == WARMUP_STEPS + 3
    assert row.loss == steps[-1]["loss"]
    assert row.observations["2"][2] == 3  # the warm-up steps are not in it
    assert row.observations["2"][0] == 0.5
    assert row.shape["batch_per_worker"] == 32.0
    assert row.shape["library_generation"] == 1
    _write(path, {"g": 1, "step": 10, "step_time": 0.8, "world_size": 2, "batch_per_worker": 32})
    ingest.ingest(row, path, partners=("other-1",))
    assert row.packed["other-1"][0] == 0.8  # measured beside a partner: not the solo profile
    assert row.observations["2"][2] == 3


def test_a_suspend_is_confirmed_until_resumed_and_bad_lines_are_counted(tmp_path: Path) -> None:
    path = tmp_path / "progress.jsonl"
    row, ingest = _row(), ProgressIngest(1 << 20)
    _write(path, {"g": 1, "event": "suspended", "step": 4}, raw="{not json\n")
    ingest.ingest(row, path)
    assert row.id in ingest.suspended
    assert row.bad_lines == 1
    assert row.progress_offset == path.stat().st_size
    _write(path, {"g": 1, "event": "resumed", "step": 4})
    ingest.ingest(row, path)
    assert row.id not in ingest.suspended


def test_a_new_ingest_sees_a_suspend_an_earlier_server_read(tmp_path: Path) -> None:
    path = tmp_path / "progress.jsonl"
    _write(path, {"g": 1, "event": "suspended", "step": 4})
    row = _row()
    row.state, row.progress_offset = State.SUSPENDED, path.stat().st_size
    fresh = ProgressIngest(1 << 20)
    fresh.ingest(row, path)
    assert row.id in fresh.suspended
