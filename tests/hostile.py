"""A corpus of hostile input, generated from tables, run against a real server.

Every field a client sends and every file a job writes gets every value of
``VALUES`` (types, bounds, encodings, terminal tricks), plus raw bodies and
raw lines no table produces. ``run_corpus`` sends it all and returns what
went wrong, as strings; the test asserts there is nothing. It is a module of
its own so the same corpus can be pointed at an older server, to count how
many cases the fixes changed (``python -m tests.hostile URL``).

What counts as wrong:
* any 5xx answer, or the server not answering ``/health`` afterwards;
* a value of the wrong type accepted where the field is strict (``true``
  for an integer, ``"2"`` for a number);
* a job that vanishes from ``GET /jobs``, a good job that changes, a
  damaged row for what a job wrote;
* progress served that breaks its type rule, or lines neither served nor
  counted as bad;
* the CLI crashing, or passing an escape sequence to the terminal.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

DEEP: Any = []
for _ in range(60):
    DEEP = [DEEP]

VALUES: dict[str, Any] = {
    "null": None,
    "true": True,
    "false": False,
    "zero": 0,
    "one": 1,
    "two": 2,
    "minus_one": -1,
    "int32_over": 2**31,
    "int64_max": 2**63 - 1,
    "int64_over": 2**63,
    "huge_int": 10**300,
    "float": 1.5,
    "float_whole": 2.0,
    "neg_zero": -0.0,
    "tiny": 5e-324,
    "big_float": 1e308,
    "empty": "",
    "space": " ",
    "digits": "2",
    "true_string": "true",
    "nan_string": "NaN",
    "markup": "[/]",
    "markup_style": "[bold red]x[/]",
    "clear_screen": "\x1b[2J",
    "osc_title": "\x1b]0;owned\x07",
    "nul": "a\x00b",
    "bidi": "abc\u202edcb",
    "newline": "a\nb",
    "carriage_return": "a\rb",
    "long": "x" * 100_000,
    "unicode": "日本語",
    "emoji_code": ":smile:",
    "shell": "$(id)`id`;id",
    "path_escape": "../../etc/passwd",
    "empty_list": [],
    "list": [1],
    "list_of_strings": ["true"],
    "empty_dict": {},
    "dict": {"a": {"b": 1}},
    "deep": DEEP,
}
"""Hostile JSON values by name: every field gets each of them."""

SPEC_FIELDS = (
    "name",
    "command",
    "gpus",
    "min_gpus",
    "max_gpus",
    "elastic",
    "arch",
    "priority",
    "user",
    "epochs",
    "retries",
    "env",
    "not_a_field",
)
STRICT_INTS = {"gpus", "min_gpus", "max_gpus", "priority", "retries"}
STRICT_NUMBERS = {"epochs"}
STRICT_BOOLS = {"elastic"}

QUERY_VALUES = (
    "-1",
    "0",
    "1",
    str(2**31),
    str(2**63),
    str(10**300),
    "1" * 5000,
    "1.5",
    "abc",
    "",
    "nan",
    "inf",
    "1e400",
    "\uff11",
    " 1",
    "0x10",
    "true",
    "-0",
)
"""Values for every integer query parameter."""

JOB_IDS = (
    "no-such-job",
    "..",
    "%2e%2e",
    "a" * 300,
    "a" * 5000,
    "%00",
    "%E2%80%AE",
    "x%2F..%2Fhealth",
    "1e400",
    "%5B%2F%5D",
)
"""Raw (already escaped) path segments for every per-job endpoint."""

PROGRESS_KEYS = (
    "g",
    "event",
    "step",
    "restored_step",
    "epoch",
    "loss",
    "step_time",
    "world_size",
    "lr",
    "batch_per_worker",
    "examples_per_epoch",
    "grad_bytes",
    "memory_gib",
    "t",
    "t_custom",
    "path",
    "why",
    "unknown_key",
)

RAW_LINES: tuple[bytes, ...] = (
    b"not json",
    b"[1, 2]",
    b"42",
    b'"a string"',
    b"null",
    b"true",
    b'{"g": __G__, "step": NaN}',
    b'{"g": __G__, "step": 5, "loss": Infinity}',
    b'{"g": __G__, "step": 5, "loss": -Infinity}',
    b'{"g": __G__, "step": 5, "step": 6}',
    b'{"g": __G__, "step": 5, "loss": 1e400}',
    b'{"g": __G__, "step": 5}' + b" " * 70_000,
    b'{"g": __G__, "step": 5, "why": "' + b"x" * 200_000 + b'"}',
    b'{"g": __G__, "step": \xff\xfe}',
    b'\xef\xbb\xbf{"g": __G__, "step": 5}',
    b'{"g": __G__, "step": 5, "path": "a\x00b"}',
    b'{"g": __G__, "step": 5, "why": "\\ud800"}',
    b'{"g": __G__, "step": ' + b"9" * 5000 + b"}",
    b"[" * 100_000,
    b"{" * 1000,
    b'{"g": __G__, "step": 5',
    b"\x00\x00\x00\x00",
    b'{"g": __G__, "step": 5, "loss": "[/]"}',
    b'{"g": __G__, "event": "\x1b[2J", "step": 5}',
    b'{"g": "__G__", "step": 5}',
    b'{"g": __G__, "step": "5"}',
    b'{"g": __G__, "step": true}',
    b'{"g": __G__, "step": 5.5}',
    b'{"g": __G__, "step": -1}',
    b'{"g": __G__, "step": 7, "epoch": 0.5, "loss": 0.25}',
)
"""Lines no value table makes: bad encodings, bad JSON, sizes; the last one is good."""

BODIES: tuple[tuple[str, bytes], ...] = (
    ("application/json", b'{"name": "a", "command": ["true"], "gpus": 1, "gpus": 2}'),
    ("application/json", b'{"name": "a", "command": ["true"], "epochs": NaN}'),
    ("application/json", b'{"name": "a", "command": ["true"], "epochs": Infinity}'),
    ("application/json", b'{"name": "a", "command": ["true"], "epochs": 1e400}'),
    ("application/json", b'\xef\xbb\xbf{"name": "a", "command": ["true"]}'),
    ("application/json", '{"name": "a", "command": ["true"]}'.encode("utf-16")),
    ("application/json", b'{"name": "a", "command": ["\xff"]}'),
    ("application/json", b'{"name": "a", "command": ["true"], "gpus": ' + b"9" * 5000 + b"}"),
    ("application/json", b""),
    ("application/json", b"null"),
    ("application/json", b"[" * 100_000),
    ("application/json", b'{"name": "a", "command": ["true"]'),
    ("application/json", b'{"name": "a", "command": ["\\ud800"]}'),
    ("application/json", b'{"name": "a\\u0000", "command": ["true"]}'),
    ("text/plain", b'{"name": "a", "command": ["true"]}'),
    ("application/x-www-form-urlencoded", b"name=a&command=true"),
    ("multipart/form-data; boundary=x", b'--x\r\n\r\n{"name": "a"}\r\n--x--'),
    ("", b'{"name": "a", "command": ["true"]}'),
    ("application/json-patch+json", b'{"name": "a", "command": ["true"]}'),
    ("text/html", b"<script>alert(1)</script>"),
)
"""Raw bodies for POST /jobs: wire tricks no value table makes."""

EXIT_FILES: tuple[tuple[bytes, int | None], ...] = (
    (b"0\n", 0),
    (b"1\n", 1),
    (b"-9\n", -9),
    (b"255", 255),
    (b"256", None),
    (b"999999999999", None),
    (b"abc", None),
    (b"", None),
    (b"\x00", None),
    (b"1" * 5000, None),
    (b" 3 \n", 3),
    (b"\xff\xfe", None),
    (b"1.0", None),
    (b"--1", None),
)
"""What a rank's exit file may hold, and the code it must read as (None: no code)."""

RANK_NAMES: tuple[tuple[str, int | None], ...] = (
    ("rank0.exit", 0),
    ("rank12.exit", 12),
    ("rank.exit", None),
    ("rank-1.exit", None),
    ("rank\u00b2.exit", None),
    ("rank\uff11.exit", None),
    ("rank99999999.exit", None),
    ("rankabc.exit", None),
    ("rank1.exit.exit", None),
)


@dataclass
class Report:
    cases: int = 0
    failures: list[str] = field(default_factory=list)
    by_part: dict[str, int] = field(default_factory=dict)

    def fail(self, case: str, why: str) -> None:
        self.failures.append(f"{case}: {why}")


def _check(report: Report, case: str, response: httpx.Response, allowed: set[int]) -> None:
    report.cases += 1
    if response.status_code >= 500:
        report.fail(case, f"server error {response.status_code}: {response.text[:200]}")
    elif response.status_code not in allowed:
        report.fail(case, f"answered {response.status_code}, expected {sorted(allowed)}")


def _wrong_type(name: str, value: Any) -> bool:
    """Whether ``value`` must be refused for spec field ``name`` on type alone."""
    if value is None and name in {"min_gpus", "max_gpus"}:
        return False  # optional: null means "not given"
    if name in STRICT_INTS:
        return isinstance(value, bool) or not isinstance(value, int)
    if name in STRICT_NUMBERS:
        return isinstance(value, bool) or not isinstance(value, int | float)
    if name in STRICT_BOOLS:
        return not isinstance(value, bool)
    return False


def submissions(client: httpx.Client, report: Report) -> list[str]:
    """Every spec field × every value; returns the ids accepted (cancelled at once)."""
    accepted = []
    before = report.cases
    for name in SPEC_FIELDS:
        for label, value in VALUES.items():
            for where, spec in _placements(name, value):
                case = f"POST /jobs {where}={label}"
                try:
                    r = client.post("/jobs", json=spec)
                except ValueError:  # httpx cannot encode it (a lone surrogate): skip
                    continue
                _check(report, case, r, {201, 422})
                if r.status_code == 201:
                    if _wrong_type(name, value):
                        report.fail(case, f"accepted a {type(value).__name__} for {name}")
                    job_id = r.json()["id"]
                    accepted.append(job_id)
                    client.delete(f"/jobs/{job_id}")
    report.by_part["spec fields"] = report.cases - before
    return accepted


def _placements(name: str, value: Any) -> list[tuple[str, dict[str, Any]]]:
    base: dict[str, Any] = {"name": "hostile", "command": ["true"]}
    out = [(name, base | {name: value})]
    if name == "command":
        out.append(("command[1]", base | {"command": ["true", value]}))
    if name == "env":
        out.append(("env.X", base | {"env": {"X": value}}))
        if isinstance(value, str):
            out.append(("env key", base | {"env": {value: "x"}}))
    return out


def bodies(client: httpx.Client, report: Report) -> None:
    before = report.cases
    for i, (kind, body) in enumerate(BODIES):
        headers = {"Content-Type": kind} if kind else {}
        r = client.post("/jobs", content=body, headers=headers)
        _check(report, f"POST /jobs body #{i} ({kind or 'no type'})", r, {415, 422})
    for label, value in VALUES.items():
        r = client.patch("/jobs/no-such-job", json={"priority": value})
        _check(report, f"PATCH priority={label} (no job)", r, {404, 422})
    r = client.patch("/jobs/no-such-job", content=b'{"priority": 1}', headers={})
    _check(report, "PATCH without a content type", r, {415})
    report.by_part["bodies"] = report.cases - before


def queries(client: httpx.Client, report: Report, good: str) -> None:
    before = report.cases
    for param, path in (("rank", "logs"), ("offset", "logs"), ("every", "progress")):
        for value in QUERY_VALUES:
            r = client.get(f"/jobs/{good}/{path}", params={param: value})
            _check(report, f"GET {path}?{param}={value[:20]!r}", r, {200, 404, 422})
    for param in ("limit", "cursor"):
        for value in QUERY_VALUES:
            r = client.get("/jobs", params={param: value})
            _check(report, f"GET /jobs?{param}={value[:20]!r}", r, {200, 422})
    for label, value in VALUES.items():
        if isinstance(value, str) and len(value) < 5000:
            for param in ("state", "user", "order"):
                r = client.get("/jobs", params={param: value})
                _check(report, f"GET /jobs?{param}={label}", r, {200, 422})
    for raw in JOB_IDS:
        for method, suffix in (
            ("GET", ""),
            ("GET", "/logs"),
            ("GET", "/progress"),
            ("DELETE", ""),
            ("PATCH", ""),
        ):
            kw: dict[str, Any] = {"json": {"priority": 1}} if method == "PATCH" else {}
            url = httpx.URL(str(client.base_url).rstrip("/") + f"/jobs/{raw}{suffix}")
            r = client.request(method, url, **kw)
            _check(report, f"{method} /jobs/{raw[:20]}{suffix}", r, {404, 422})
    report.by_part["queries and ids"] = report.cases - before


def progress_corpus() -> list[bytes]:
    """Every progress key × every value, then the raw lines: the lines a job will write."""
    lines = []
    for key in PROGRESS_KEYS:
        for value in VALUES.values():
            record = {"g": "__G__", "step": 3, "epoch": 0.1}
            record[key] = value
            text = json.dumps(record).replace('"__G__"', "__G__")
            lines.append(text.encode())
    return [*lines, *RAW_LINES]


JOB_SCRIPT = """
import os, sys, time
from pathlib import Path
job_dir = Path(os.environ["RINGLEADER_JOB_DIR"])
g = os.environ["RINGLEADER_GENERATION"].encode()
corpus = Path(sys.argv[1]).read_bytes().split(b"\\n@@\\n")
with open(job_dir / "progress.jsonl", "ab") as f:
    for line in corpus:
        f.write(line.replace(b"__G__", g) + b"\\n")
print("log line with \\x1b[2J a clear-screen, \\x1b]0;owned\\x07 a title, [/] markup")
print("\\u202e reversed and a bell \\x07", flush=True)
time.sleep(float(sys.argv[2]))
"""


def job_files(client: httpx.Client, report: Report, tmp: Path, url: str) -> tuple[str, list[bytes]]:
    """A real job writes the whole progress corpus; returns its id and the lines."""
    lines = progress_corpus()
    corpus = tmp / "corpus.bin"
    corpus.write_bytes(b"\n@@\n".join(lines))
    script = tmp / "hostile_job.py"
    script.write_text(JOB_SCRIPT)
    spec = {
        "name": "writes-anything",
        "command": [sys.executable, str(script), str(corpus), "3"],
    }
    r = client.post("/jobs", json=spec)
    _check(report, "POST the hostile job", r, {201})
    job_id = r.json()["id"] if r.status_code == 201 else ""
    report.cases += len(lines)
    report.by_part["progress lines"] = len(lines)
    return job_id, lines


TYPES: dict[str, tuple[type, ...]] = {
    "g": (int,),
    "step": (int,),
    "restored_step": (int, type(None)),
    "world_size": (int,),
    "epoch": (int, float),
    "loss": (int, float, type(None)),
    "lr": (int, float, type(None)),
    "step_time": (int, float),
    "batch_per_worker": (int, float),
    "examples_per_epoch": (int, float),
    "grad_bytes": (int, float),
    "memory_gib": (int, float),
    "t": (int, float, type(None)),
    "event": (str,),
    "path": (str,),
    "why": (str,),
}
"""What a served progress record's values may be (JSON has no NaN: finite by construction)."""


def check_job(client: httpx.Client, report: Report, job_id: str, written: int) -> None:
    """The job that wrote the corpus: listed, readable, counted, served with sane types."""
    listed = listed_jobs(client)
    if job_id not in listed:
        report.fail("hostile job", "vanished from GET /jobs")
        return
    r = client.get(f"/jobs/{job_id}")
    _check(report, "GET the hostile job", r, {200})
    job = r.json() if r.status_code == 200 else {}
    if job.get("state") == "damaged":
        report.fail("hostile job", f"its row was damaged by what it wrote: {job.get('error')}")
    r = client.get(f"/jobs/{job_id}/progress")
    _check(report, "GET the hostile job's progress", r, {200})
    if r.status_code != 200:
        return
    served = r.json()
    bad = int(r.headers.get("X-Bad-Lines", "-1"))
    if len(served) + bad != written:
        report.fail("progress", f"{written} lines written, {len(served)} served + {bad} bad")
    if job.get("bad_progress_lines") != bad:
        report.fail("progress", f"job shows {job.get('bad_progress_lines')} bad lines, API {bad}")
    for rec in served:
        for key, value in rec.items():
            allowed = TYPES.get(key, (int, float, type(None)) if key.startswith("t_") else ())
            if isinstance(value, bool) or not isinstance(value, allowed):
                report.fail("progress", f"served {key}={str(value)[:40]!r}")
    if not isinstance(job.get("step"), int) or isinstance(job.get("step"), bool):
        report.fail("hostile job", f"step is {job.get('step')!r}")


def check_cli(url: str, report: Report, job_ids: list[str]) -> None:
    env = {**os.environ, "RINGLEADER_URL": url, "COLUMNS": "200", "TERM": "xterm"}
    commands = [["jobs"], ["jobs", "--json"]]
    for job_id in job_ids:
        commands += [["show", job_id], ["logs", job_id]]
    for args in commands:
        report.cases += 1
        out = subprocess.run(
            [sys.executable, "-m", "ringleader", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        case = f"ringleader {' '.join(args)}"
        if out.returncode != 0 or "Traceback" in out.stderr:
            report.fail(case, f"exit {out.returncode}: {out.stderr[-300:]}")
        if "\x1b" in out.stdout or "\x07" in out.stdout or "\u202e" in out.stdout:
            report.fail(case, "passed a control character to the terminal")


def damaged_row(client: httpx.Client, report: Report, db: Path, job_id: str) -> None:
    """A row damaged in the store (by hand, by a bad upgrade) is listed and shown, not hidden."""
    import sqlite3

    raw = sqlite3.connect(db)
    raw.execute("UPDATE jobs SET step = 'many' WHERE id = ?", (job_id,))
    raw.commit()
    raw.close()
    report.cases += 3
    listed = listed_jobs(client)
    if listed.get(job_id, {}).get("state") != "damaged":
        report.fail("damaged row", f"listed as {listed.get(job_id)!r}")
    r = client.get(f"/jobs/{job_id}")
    if r.status_code != 200 or r.json().get("state") != "damaged":
        report.fail("damaged row", f"GET answered {r.status_code}: {r.text[:200]}")
    r = client.delete(f"/jobs/{job_id}")
    if r.status_code >= 500:
        report.fail("damaged row", f"DELETE answered {r.status_code}")


def listed_jobs(client: httpx.Client) -> dict[str, dict[str, Any]]:
    """Every job ``GET /jobs`` lists, by id, following its cursor page by page."""
    out: dict[str, dict[str, Any]] = {}
    params: dict[str, Any] = {"limit": 1000}
    while True:
        r = client.get("/jobs", params=params)
        if r.status_code != 200:
            return out
        out.update((j["id"], j) for j in r.json())
        if "X-Next-Cursor" not in r.headers:
            return out
        params["cursor"] = r.headers["X-Next-Cursor"]


def alive(client: httpx.Client, report: Report) -> None:
    try:
        ok = client.get("/health").json().get("ok")
    except (httpx.HTTPError, ValueError) as err:
        ok = False
        report.fail("health", str(err))
    if not ok:
        report.fail("health", "the server stopped answering")


def wait_state(client: httpx.Client, job_id: str, states: set[str], timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        job: dict[str, Any] = client.get(f"/jobs/{job_id}").json()
        if job.get("state") in states or time.monotonic() > deadline:
            return job
        time.sleep(0.3)


class _Dropped(httpx.HTTPTransport):
    """A connection the server dropped or reset reads as status 599: a case that failed."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        try:
            return super().handle_request(request)
        except httpx.TransportError as err:
            return httpx.Response(599, text=f"connection failed: {err}", request=request)


def run_corpus(url: str, tmp: Path, db: Path | None = None, token: str = "") -> Report:
    """Send the whole corpus to the server at ``url`` with ``token``; what went wrong,
    case by case."""
    report = Report()
    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, timeout=30, transport=_Dropped(), headers=auth) as client:
        r = client.post("/jobs", json={"name": "good", "command": ["true"]})
        good = r.json()["id"]
        before = wait_state(client, good, {"succeeded", "failed"}, 60)
        hostile, lines = job_files(client, report, tmp, url)
        submissions(client, report)
        alive(client, report)
        bodies(client, report)
        queries(client, report, good)
        alive(client, report)
        if hostile:
            wait_state(client, hostile, {"succeeded", "failed", "cancelled", "damaged"}, 90)
            check_job(client, report, hostile, len(lines))
        check_cli(url, report, [good, hostile] if hostile else [good])
        after = client.get(f"/jobs/{good}").json()
        if after != before:
            report.fail("good job", "changed while the corpus ran")
        if good not in listed_jobs(client):
            report.fail("good job", "vanished from GET /jobs")
        if db is not None and hostile:
            damaged_row(client, report, db, hostile)
        alive(client, report)
    return report


if __name__ == "__main__":  # point the corpus at any running server
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        state = Path(sys.argv[2]) / "ringleader.db" if len(sys.argv) > 2 else None
        result = run_corpus(sys.argv[1], Path(scratch), state, os.environ["RINGLEADER_TOKEN"])
    print(json.dumps({"cases": result.cases, "by_part": result.by_part}, indent=2))
    print(f"{len(result.failures)} failures")
    for line in result.failures:
        print(" ", line[:300])
