"""``ringleader sweep``: a small real grid, and bad configs refused with exit 2."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path


def _sweep(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ringleader", "sweep", str(config)],
        env={**os.environ, "COLUMNS": "80"},  # a terminal's width: no cell may be cut
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_grid_becomes_one_row_per_run_and_plots(tmp_path: Path) -> None:
    config = tmp_path / "sweep.yaml"
    out = tmp_path / "out"
    config.write_text(
        "traces: [itp:cluster10]\nload_scale: [1.0, 2.0]\npolicies: [fifo, ringleader]\n"
        f"seeds: [0, 3]\nout: {out}\n"
    )
    done = _sweep(config)
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert len(rows) == 1 * 2 * 2 * 2
    assert {(r["load_scale"], r["policy"], r["seed"]) for r in rows} == {
        (ls, p, s) for ls in ("1.0", "2.0") for p in ("fifo", "ringleader") for s in ("0", "3")
    }
    for r in rows:
        assert r["jobs"] == "260" and float(r["avg_jct_s"]) > 0
        # No float noise (21684.199999999255): at most four digits after the point.
        for field in ("avg_jct_s", "p99_jct_s", "makespan_s", "utilization", "wall_s"):
            assert len(r[field].partition(".")[2]) <= 4, (field, r[field])
    by = {(r["load_scale"], r["policy"], r["seed"]): float(r["avg_jct_s"]) for r in rows}
    assert by[("2.0", "fifo", "0")] > by[("1.0", "fifo", "0")]  # more load, longer JCT
    assert by[("1.0", "fifo", "3")] != by[("1.0", "fifo", "0")]  # a seed jitters arrivals
    for plot in ("jct_vs_load.png", "jct_cdf.png", "utilization.png"):
        assert (out / plot).read_bytes()[:4] == b"\x89PNG"
    # The run ends with a table of means over seeds, each against the best policy there.
    table = [line.split() for line in done.stdout.splitlines() if "itp:cluster10" in line]
    assert all(len(line) == 9 and "…" not in " ".join(line) for line in table), table
    assert len(table) == 2 * 2  # (load, policy), the two seeds folded into one line
    shown = {
        (load, policy): (seeds, avg, ratio) for _, _, load, policy, seeds, avg, _, ratio, _ in table
    }
    for ls in ("1.0", "2.0"):
        for policy in ("fifo", "ringleader"):
            mean_h = (by[(ls, policy, "0")] + by[(ls, policy, "3")]) / 2 / 3600
            assert shown[(ls[0], policy)][:2] == ("2", f"{mean_h:.2f}")
        assert "1.00x" in {shown[(ls[0], p)][2] for p in ("fifo", "ringleader")}


def test_bad_sweep_configs_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    dup = tmp_path / "dup.csv"
    dup.write_text("job_id,submission_time,duration,num_gpu\na,0,10,1\na,5,10,1\n")
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for text, expected in (
        ("traces: [itp:cluster10]\npolicies: [fastest]\n", "unknown ['fastest']"),
        ("traces: [itp:nope]\npolicies: [fifo]\n", "itp:nope"),
        ("traces: [itp:cluster10]\npolicies: [fifo]\nload_scale: [-1]\n", "load_scale"),
        ("traces: [itp:cluster10]\npolicies: [fifo]\ncolour: red\n", "colour"),
        ("traces: [itp:cluster10]\npolicies: [fifo]\nseeds: []\n", "seeds"),
        ("traces: [itp:cluster10]\npolicies: [fifo]\nload_scale: [.nan]\n", "finite"),
        ("traces: [itp:cluster10]\npolicies: [fifo]\ntick_s: 0\n", "tick_s"),
        ("traces: [itp:cluster10]\npolicies: [fifo]\ngpus: [1]\n", "widest job needs 16"),
        ("traces: [itp:cluster10]\npolicies: [fifo, [x]]\n", "policies[1]"),
        (f"traces: [{dup}]\npolicies: [fifo]\n", "appears twice"),
        (f"traces: [itp:cluster10]\npolicies: [fifo]\nout: {a_file}\n", "out"),
    ):
        config.write_text(text)
        done = _sweep(config)
        assert done.returncode == 2, text
        assert expected in done.stderr and "Traceback" not in done.stderr


def test_a_sweep_can_decide_once_a_tick() -> None:
    from ringleader.scenarios.sweep import Cell, run_cell

    every, _, _ = run_cell(Cell("itp:cluster10", None, 2.0, "tiresias", 0))
    ticked, _, _ = run_cell(Cell("itp:cluster10", None, 2.0, "tiresias", 0, tick_s=300.0))
    assert (every.tick_s, ticked.tick_s) == (None, 300.0)
    assert ticked.jobs == every.jobs == 260
    # Starts wait for the tick: the same jobs, a little later on average.
    assert every.avg_queueing_s < ticked.avg_queueing_s
