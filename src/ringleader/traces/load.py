"""Trace loaders with validation: a bad row is an error naming its line and column.

Formats:

* ``itp`` — ``job_id,submission_time,duration,num_gpu`` (the ITP raw traces);
* ``itp-elasticflow`` — adds ``num_iteration,model_name,deadline,batch_size``;
* ``gavel`` — tab-separated: job type, command, steps argument, needs-data flag,
  total steps, arrival time (s), GPUs (Gavel's Philly-derived per-VC traces).

Bundled traces are named ``itp:cluster07``, ``itp-elasticflow:195job``,
``gavel:0e4a51``; ``available_traces()`` lists them.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal

from ringleader.inputs import read_capped

TraceFormat = Literal["itp", "itp-elasticflow", "gavel"]
FORMATS: tuple[TraceFormat, ...] = ("itp", "itp-elasticflow", "gavel")
_DIRS: dict[TraceFormat, str] = {
    "itp": "itp-raw",
    "itp-elasticflow": "itp-elasticflow",
    "gavel": "gavel-philly-vc",
}
MAX_BYTES = 200 * 1024 * 1024


class TraceError(ValueError):
    """A trace that cannot be used: the message names the file, line and column."""


@dataclass(frozen=True, slots=True)
class TraceJob:
    id: str
    submit_s: float
    gpus: int
    duration_s: float | None = None
    """Measured run time at ``gpus`` GPUs (ITP traces)."""
    model: str | None = None
    steps: int | None = None
    """Total training steps (Gavel and ElasticFlow traces)."""


MAX_SECONDS = 1e9
"""Arrival times and durations beyond ~30 years are typos, not traces."""
MAX_GPUS = 4096
MAX_STEPS = 1e12


def _number(
    text: str,
    where: str,
    *,
    integer: bool = False,
    minimum: float = 0.0,
    maximum: float = MAX_SECONDS,
) -> float:
    try:
        value = float(text)
    except ValueError:
        raise TraceError(f"{where}: {text!r} is not a number") from None
    if not math.isfinite(value):
        raise TraceError(f"{where}: {text!r} is not a finite number")
    if value < minimum:
        raise TraceError(f"{where}: {text!r} must be at least {minimum:g}")
    if value > maximum:
        raise TraceError(f"{where}: {text!r} must be at most {maximum:g}")
    if integer and value != int(value):
        raise TraceError(f"{where}: {text!r} must be a whole number")
    return value


def _read(path: Path) -> str:
    text = read_capped(path, MAX_BYTES, "trace", TraceError)
    if not text.strip():
        raise TraceError(f"{path}: the trace is empty")
    return text


def _csv(
    path: Path, header: tuple[str, ...], row: Callable[[dict[str, str], str], TraceJob]
) -> list[TraceJob]:
    reader = csv.DictReader(io.StringIO(_read(path)))
    got = tuple(reader.fieldnames or ())
    if got != header:
        raise TraceError(
            f"{path}: line 1: header is {','.join(got) or '(nothing)'}; expected {','.join(header)}"
        )
    jobs = []
    for record in reader:
        line = reader.line_num
        if None in record or any(v is None for v in record.values()):
            raise TraceError(f"{path}: line {line}: expected {len(header)} columns")
        jobs.append(row(record, f"{path}: line {line}"))
    if not jobs:
        raise TraceError(f"{path}: the trace has a header but no jobs")
    return jobs


def _itp_row(r: dict[str, str], at: str) -> TraceJob:
    if not r["job_id"]:
        raise TraceError(f"{at}, column 'job_id': empty")
    return TraceJob(
        id=r["job_id"],
        submit_s=_number(r["submission_time"], f"{at}, column 'submission_time'"),
        duration_s=_number(r["duration"], f"{at}, column 'duration'"),
        gpus=int(
            _number(
                r["num_gpu"], f"{at}, column 'num_gpu'", integer=True, minimum=1, maximum=MAX_GPUS
            )
        ),
    )


def _elasticflow_row(r: dict[str, str], at: str) -> TraceJob:
    base = _itp_row(r, at)
    steps = _number(
        r["num_iteration"],
        f"{at}, column 'num_iteration'",
        integer=True,
        minimum=1,
        maximum=MAX_STEPS,
    )
    return TraceJob(
        base.id, base.submit_s, base.gpus, base.duration_s, r["model_name"] or None, int(steps)
    )


def _gavel(path: Path) -> list[TraceJob]:
    jobs = []
    for i, raw in enumerate(_read(path).splitlines(), start=1):
        if not raw.strip():
            continue
        cols = raw.split("\t")
        at = f"{path}: line {i}"
        if len(cols) != 7:
            raise TraceError(f"{at}: expected 7 tab-separated columns, got {len(cols)}")
        steps = _number(
            cols[4], f"{at}, column 5 (total steps)", integer=True, minimum=1, maximum=MAX_STEPS
        )
        arrival = _number(cols[5], f"{at}, column 6 (arrival time)")
        gpus = _number(cols[6], f"{at}, column 7 (GPUs)", integer=True, minimum=1, maximum=MAX_GPUS)
        jobs.append(TraceJob(f"{path.stem}-{i:05d}", arrival, int(gpus), None, cols[0], int(steps)))
    return jobs


def load_trace(path: Path, fmt: TraceFormat) -> list[TraceJob]:
    """Every job of a trace file, sorted by submission; ``TraceError`` on any bad row."""
    if fmt == "itp":
        jobs = _csv(path, ("job_id", "submission_time", "duration", "num_gpu"), _itp_row)
    elif fmt == "itp-elasticflow":
        header = (
            "job_id",
            "submission_time",
            "num_iteration",
            "model_name",
            "deadline",
            "batch_size",
            "num_gpu",
            "duration",
        )
        jobs = _csv(path, header, _elasticflow_row)
    elif fmt == "gavel":
        jobs = _gavel(path)
    else:
        raise TraceError(f"unknown trace format {fmt!r}; choose one of {', '.join(FORMATS)}")
    seen: set[str] = set()
    for job in jobs:
        if job.id in seen:
            raise TraceError(f"{path}: job id {job.id!r} appears twice; every job needs its own id")
        seen.add(job.id)
    return sorted(jobs, key=lambda j: (j.submit_s, j.id))


def _bundled() -> Path:
    return Path(str(resources.files("ringleader") / "data" / "traces"))


def available_traces() -> list[str]:
    out = []
    for fmt, folder in _DIRS.items():
        for path in sorted((_bundled() / folder).glob("*")):
            if path.suffix in (".csv", ".trace"):
                out.append(f"{fmt}:{path.stem}")
    return out


def resolve_trace(name: str, fmt: TraceFormat | None = None) -> tuple[Path, TraceFormat]:
    """A file path, or a bundled trace name like ``itp:cluster07``; guesses the format."""
    prefix, _, stem = name.partition(":")
    by_name: dict[str, TraceFormat] = {f: f for f in FORMATS}
    if stem and prefix in by_name and not Path(name).exists():
        fmt_name = by_name[prefix]
        folder = _bundled() / _DIRS[fmt_name]
        matches = [p for p in folder.iterdir() if p.stem == stem and p.suffix in (".csv", ".trace")]
        if not matches:
            raise TraceError(f"unknown trace {name!r}; bundled: {', '.join(available_traces())}")
        if fmt is not None and fmt != fmt_name:
            raise TraceError(f"format {fmt!r} does not apply: bundled trace {name} is {fmt_name}")
        return matches[0], fmt_name
    if fmt is not None and fmt not in by_name:
        raise TraceError(f"unknown trace format {fmt!r}; choose one of {', '.join(FORMATS)}")
    path = Path(name)
    if fmt is not None:
        return path, fmt
    if path.suffix == ".trace":
        return path, "gavel"
    try:
        with open(path, encoding="utf-8") as f:
            first = f.readline()
    except (OSError, UnicodeDecodeError) as err:
        raise TraceError(f"{path}: cannot read the trace: {err}") from err
    return path, ("itp-elasticflow" if "num_iteration" in first else "itp")
