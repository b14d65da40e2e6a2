"""The benchmark regression check that ``make test`` runs can fail, and says why."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _check(against: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "bench" / "regress.py"), "--against", str(against)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )


def test_a_check_slower_than_twice_its_committed_figure_fails(tmp_path: Path) -> None:
    committed = json.loads((ROOT / "bench" / "results" / "regress.json").read_text())
    table3 = committed["checks"]["sim-table3-extreme-precompute"]
    figures = tmp_path / "regress.json"
    # As if it had once taken a thousandth of what it takes.
    figures.write_text(
        json.dumps({"checks": {"sim-table3-extreme-precompute": {**table3, "ratio": 0.001}}})
    )
    slow = _check(figures)
    assert slow.returncode == 1, slow.stdout + slow.stderr
    assert "SLOWER sim-table3-extreme-precompute" in slow.stdout
    assert "--record" in slow.stdout  # says how to accept a slowdown that is meant
    # The same check against a generous figure passes.
    figures.write_text(
        json.dumps({"checks": {"sim-table3-extreme-precompute": {**table3, "ratio": 1000}}})
    )
    fast = _check(figures)
    assert fast.returncode == 0, fast.stdout + fast.stderr
    assert "ok     sim-table3-extreme-precompute" in fast.stdout


def test_no_figures_is_a_clear_error(tmp_path: Path) -> None:
    missing = _check(tmp_path / "none.json")
    assert missing.returncode == 2
    assert "--record" in missing.stdout and "Traceback" not in missing.stderr
