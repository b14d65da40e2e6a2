"""A server that cannot have its port leaves the one that holds it alone.

Seen in the first hour (issue 59): a second ``ringleader server`` on a busy
port said it was serving, then failed, and on its way out removed the live
server's record, so the CLI on that host lost the live server's token.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ringleader.credentials import config_dir
from tests.live_server import LiveServer, run_cli, serving


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    yield from serving(tmp_path_factory.mktemp("claims-server"), 1)


def test_a_second_server_on_a_busy_port_refuses_and_leaves_the_first_alone(
    server: LiveServer, tmp_path: Path
) -> None:
    record = config_dir() / "servers" / f"{server.port}.json"
    before = json.loads(record.read_text())
    flags = ["--gpus", "1", "--port", str(server.port), "--state-dir", str(tmp_path / "second")]
    second = subprocess.run(
        [sys.executable, "-m", "ringleader", "server", "--no-isolate-jobs", *flags],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert second.returncode == 2  # refused, as any setting it will not start with
    said = second.stdout + second.stderr
    assert f"port {server.port} on 127.0.0.1 is in use" in said and "another --port" in said
    assert "serving on" not in said and "Traceback" not in said
    assert json.loads(record.read_text()) == before  # the live server's record, untouched
    listed = run_cli(server.url, "jobs")
    assert listed.returncode == 0, listed.stderr  # the CLI still finds its token
