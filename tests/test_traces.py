"""Trace loading: bundled traces load; every malformed one is an exit-2 error naming the line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ringleader.traces.jobs import recommended_gpus, to_sim_jobs
from ringleader.traces.load import TraceError, available_traces, load_trace, resolve_trace

HEADER = "job_id,submission_time,duration,num_gpu\n"


def test_every_bundled_trace_loads() -> None:
    names = available_traces()
    assert len([n for n in names if n.startswith("itp:")]) == 8
    for name in names:
        path, fmt = resolve_trace(name)
        jobs = load_trace(path, fmt)
        assert jobs and all(j.gpus >= 1 for j in jobs)
        assert [j.submit_s for j in jobs] == sorted(j.submit_s for j in jobs)
    path, fmt = resolve_trace("itp:cluster07")
    assert len(load_trace(path, fmt)) == 12_699


def test_trace_jobs_take_their_trace_duration_at_their_size() -> None:
    path, fmt = resolve_trace("itp:cluster10")
    rows = load_trace(path, fmt)
    for row, job in zip(rows[:20], to_sim_jobs(rows[:20]), strict=True):
        assert row.duration_s is not None
        seconds = job.work_scale * job.profile.seconds_alone(row.gpus)
        assert seconds == pytest.approx(max(row.duration_s, 1.0))
    assert recommended_gpus(rows) % 8 == 0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("id,when,duration,num_gpu\na,1,2,1\n", "line 1: header is id,when,duration,num_gpu"),
        (HEADER + "a,0,-5,1\n", "line 2, column 'duration': '-5' must be at least 0"),
        (HEADER + "a,0,10,1\nb,zero,10,1\n", "line 3, column 'submission_time': 'zero' is not"),
        (HEADER + "a,0,10,1.5\n", "column 'num_gpu': '1.5' must be a whole number"),
        (HEADER + "a,0,10,0\n", "column 'num_gpu': '0' must be at least 1"),
        (HEADER + "a,0,10\n", "line 2: expected 4 columns"),
        (HEADER + "a,0,nan,1\n", "not a finite number"),
        ("", "the trace is empty"),
        (HEADER, "has a header but no jobs"),
        (HEADER + "a,1e308,10,1\n", "'1e308' must be at most"),
        (HEADER + "a,0,10,100000000\n", "'100000000' must be at most 4096"),
        (HEADER + "a,0,10,1\na,5,10,1\n", "job id 'a' appears twice"),
    ],
)
def test_malformed_itp_traces_name_line_and_reason(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(TraceError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        load_trace(path, "itp")


def test_malformed_gavel_rows(tmp_path: Path) -> None:
    path = tmp_path / "bad.trace"
    path.write_text("ResNet-18 (batch size 16)\tcmd\t-n\t1\t100\t0.0\t1\nLM\tcmd\t-n\t1\n")
    with pytest.raises(TraceError, match="line 2: expected 7 tab-separated columns, got 4"):
        load_trace(path, "gavel")


def test_cli_exits_2_on_a_bad_trace_and_writes_json_on_a_good_one(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(HEADER + "a,0,ten,1\n")
    run = [sys.executable, "-m", "ringleader", "simulate", "--policy", "fifo", "--trace"]
    out = subprocess.run([*run, str(bad)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "line 2, column 'duration'" in out.stderr and "Traceback" not in out.stderr
    out = subprocess.run([*run, "itp:nope"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "itp:cluster07" in out.stderr
    result = tmp_path / "r.json"
    out = subprocess.run(
        [*run, "itp:cluster10", "--json", str(result)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(result.read_text())
    for key in ("avg_jct_s", "p99_jct_s", "makespan_s", "utilization", "jobs", "wall_s"):
        assert key in data
    assert data["jobs"] == 260


def test_trace_names_are_names_not_patterns_and_paths_stay_paths(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="unknown trace 'itp:\\*'"):
        resolve_trace("itp:*")
    with pytest.raises(TraceError, match="No such file"):
        load_trace(*resolve_trace(str(tmp_path / "no:such.csv")))
    with pytest.raises(TraceError, match="format 'gavel' does not apply"):
        resolve_trace("itp:cluster10", "gavel")
