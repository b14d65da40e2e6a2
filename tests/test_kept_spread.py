"""Interpolated step times kept between processes answer as fresh ones (issue 59, item 15)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from ringleader.perf.placements import StepTable, read_step_table
from ringleader.sim.pollux import DATA

CIFAR10 = DATA / "traces" / "cifar10"
SPREAD = (1, 1, 1, 1, 1, 1)
"""Six GPUs on six nodes: cifar10 was never measured there, so every batch is interpolated."""
BATCHES = np.array([32.0, 64.0, 100.0, 128.0, 5000.0])


def _asked(table: StepTable) -> np.ndarray:
    answers = table.times_many(SPREAD, BATCHES)
    table._interpolator().write()
    return answers


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RINGLEADER_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _without_scipy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any import of scipy's interpolation from here on fails."""
    monkeypatch.setitem(sys.modules, "scipy.interpolate", None)


def test_a_kept_call_answers_exactly_as_a_fresh_one_without_scipy(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fresh = _asked(read_step_table(CIFAR10))
    assert len(list(cache.glob("spread-*.json"))) == 1
    assert np.isfinite(fresh[:4]).all() and np.isnan(fresh[4]).all()
    _without_scipy(monkeypatch)
    kept = read_step_table(CIFAR10).times_many(SPREAD, BATCHES)
    np.testing.assert_array_equal(kept, fresh)


def test_a_call_never_asked_is_worked_out_fresh(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _asked(read_step_table(CIFAR10))
    _without_scipy(monkeypatch)
    with pytest.raises(ImportError):
        read_step_table(CIFAR10).times_many(SPREAD, BATCHES[:3])


def test_the_same_points_asked_in_another_call_get_that_calls_own_answers(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    together = _asked(read_step_table(CIFAR10))
    alone = []
    for i in range(4):
        table = read_step_table(CIFAR10)
        alone.append(table.times_many(SPREAD, BATCHES[i : i + 1]))
        table._interpolator().write()
    np.testing.assert_allclose(np.vstack(alone), together[:4], rtol=0.05)
    _without_scipy(monkeypatch)
    again = [read_step_table(CIFAR10).times_many(SPREAD, BATCHES[i : i + 1]) for i in range(4)]
    np.testing.assert_array_equal(np.vstack(again), np.vstack(alone))


def test_a_damaged_cache_file_is_asked_again(cache: Path) -> None:
    fresh = _asked(read_step_table(CIFAR10))
    (kept,) = cache.glob("spread-*.json")
    kept.write_text('{"' + "0" * 32 + '": [["x"]], "half": ')
    np.testing.assert_array_equal(_asked(read_step_table(CIFAR10)), fresh)
    assert kept.read_text().startswith("{")
    np.testing.assert_array_equal(read_step_table(CIFAR10).times_many(SPREAD, BATCHES), fresh)


def test_an_empty_ringleader_cache_keeps_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RINGLEADER_CACHE", "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    _asked(read_step_table(CIFAR10))
    assert list(tmp_path.rglob("*")) == []


def test_a_cache_that_cannot_be_written_costs_only_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    monkeypatch.setenv("RINGLEADER_CACHE", str(blocked / "cache"))
    answers = _asked(read_step_table(CIFAR10))
    assert np.isfinite(answers[:4]).all()
    assert blocked.read_text() == "not a directory"
