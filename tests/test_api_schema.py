"""A property-based fuzz of every endpoint, with a token and without (issue 14, item 7).

Schemathesis reads the server's own OpenAPI document and sends requests
generated from it (valid and invalid, from examples, boundary values and
random data) to a real server. Every reply must be no server error, have a
documented status code and content type, and match its documented schema.

Fuzzed specs are real jobs with random commands: the server runs them as an
unprivileged uid, as a root server does by default, so nothing they could
name is reachable.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.live_server import LiveServer, others_can_run_python

pytestmark = pytest.mark.slow

CHECKS = ",".join(
    (
        "not_a_server_error",
        "ignored_auth",
        "status_code_conformance",
        "content_type_conformance",
        "response_headers_conformance",
        "response_schema_conformance",
    )
)
BODILESS = frozenset({"/users/{name}/token", "/dashboard/ticket"})
"""POSTs that take no body: what they do is named by their path and the caller."""
EXAMPLES = 50
"""Per operation and phase: well over a thousand requests a run, in about 15 s on 2 cores."""
UNSIGNED_EXAMPLES = 15
"""The same without a token: every reply is the same refusal, whatever the body, so
fewer examples show it (50 took 30 s of the suite)."""


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    isolated = os.geteuid() == 0
    state = Path(tempfile.mkdtemp(prefix="rl-fuzz-"))
    with others_can_run_python() if isolated else contextlib.nullcontext():
        live = LiveServer(state, 2, 5.0, isolated=isolated).start()
        yield live
        live.stop()
        live.kill_workers()
    shutil.rmtree(state, ignore_errors=True)


@pytest.fixture(scope="module")
def document(server: LiveServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The server's OpenAPI document, fetched before any fuzz can replace the admin's token."""
    path = tmp_path_factory.mktemp("schema") / "openapi.json"
    path.write_text(json.dumps(server.http.get("/openapi.json").raise_for_status().json()))
    return path


def _fuzz(
    server: LiveServer, schema: Path, tmp_path: Path, *headers: str, examples: int = EXAMPLES
) -> dict[str, Any]:
    """Run schemathesis against the server; its JSON report, which must say no failure."""
    report = tmp_path / "report.json"
    args = [
        *("run", str(schema), "--url", server.url, "--checks", CHECKS),
        *("--max-examples", str(examples), "--seed", "14", "--workers", "1"),
        *("--phases", "examples,coverage,fuzzing", "--generation-database", "none"),
        *("--report", "json", "--report-json-path", str(report), "--no-color"),
        *(arg for header in headers for arg in ("--header", header)),
    ]
    out = subprocess.run(
        [str(Path(sys.executable).parent / "schemathesis"), *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]
    data: dict[str, Any] = json.loads(report.read_text())
    return data


def _cases(report: dict[str, Any]) -> int:
    """Requests the run sent, as generated test cases (its report's own count)."""
    assert report["complete"] and not report["failures"] and not report["errors"], report
    return int(report["test_cases"]["generated"])


def test_every_endpoint_with_a_token_gives_no_server_error_and_matches_its_schema(
    server: LiveServer, document: Path, tmp_path: Path
) -> None:
    # An admin of its own, with a name no fuzzed path will give: the fuzz may replace
    # or remove any user's token, and the run would go on without one.
    name = f"fuzzer-{secrets.token_hex(8)}"
    made = server.http.post("/users", json={"name": name, "admin": True})
    token = made.raise_for_status().json()["token"]
    report = _fuzz(server, document, tmp_path, f"Authorization: Bearer {token}")
    cases = _cases(report)
    print(f"authenticated fuzz: {cases} requests, 0 failures")
    assert cases >= 14 * EXAMPLES
    assert server.http.get("/health").json()["ok"]


def test_every_endpoint_without_a_token_gives_no_server_error_and_matches_its_schema(
    server: LiveServer, document: Path, tmp_path: Path
) -> None:
    report = _fuzz(server, document, tmp_path, examples=UNSIGNED_EXAMPLES)
    cases = _cases(report)
    print(f"unauthenticated fuzz: {cases} requests, 0 failures")
    assert cases >= 14 * 10


def test_the_document_has_a_schema_for_every_body(document: Path) -> None:
    doc = json.loads(document.read_text())
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            where = f"{method.upper()} {path}"
            if method in ("post", "patch") and path not in BODILESS:
                body = op.get("requestBody", {}).get("content", {}).get("application/json", {})
                assert "schema" in body, f"{where}: no request schema"
            ok = op["responses"].get("200") or op["responses"].get("201")
            assert ok is not None, f"{where}: no success response"
            content = ok.get("content", {})
            if "text/plain" not in content:  # a log, the metrics: text, no schema to give
                assert content["application/json"].get("schema"), f"{where}: no response schema"
            for code in ("401", "422"):
                if path != "/health":
                    assert code in op["responses"], f"{where}: {code} undocumented"
