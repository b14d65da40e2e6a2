"""``ringleader server --executor slurm`` on the lab, end to end (issue 60, item 1).

The server runs on the lab's controller host, as a site would run it where
Slurm's commands reach slurmctld; the CLI talks to it there.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ringleader.slurm.conf import LabShape
from ringleader.slurm.lab import SlurmLab, missing_tools
from tests.live_server import server_port

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the Slurm lab needs root (namespaces)"),
    pytest.mark.skipif(bool(missing_tools()), reason="no Slurm here: `make test` installs it"),
]
DDP = Path(__file__).parents[1] / "examples" / "porting" / "ddp.py"
RUNS = int(os.environ.get("RINGLEADER_SLURM_RUNS", "2"))
"""Runs of the DDP job in a row; issue 60 asks for 10 (RINGLEADER_SLURM_RUNS=10)."""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SlurmLab, dict[str, str]]]:
    root = Path("/run") / f"rl-slurm-srv-{os.getpid()}"
    state = tmp_path_factory.mktemp("slurm-server")
    port = server_port()
    with SlurmLab(LabShape(nodes=3, gpus_per_node=2), root) as lab:
        log = open(state / "server.log", "ab")  # noqa: SIM115 - the server's, closed below
        server = subprocess.Popen(
            lab.on_controller(
                [
                    *(sys.executable, "-m", "ringleader", "server", "--executor", "slurm"),
                    *("--state-dir", str(state), "--port", str(port), "--round-s", "1"),
                    "--no-isolate-jobs",
                ]
            ),
            env=lab.env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        env = {"RINGLEADER_URL": f"http://127.0.0.1:{port}"}
        try:
            deadline = time.monotonic() + 60
            while not (state / "admin.token").exists() or _cli(lab, env, "jobs").returncode:
                assert server.poll() is None, (state / "server.log").read_text()
                assert time.monotonic() < deadline, (state / "server.log").read_text()
                time.sleep(0.3)
            env["RINGLEADER_TOKEN"] = (state / "admin.token").read_text().strip()
            yield lab, env
        finally:
            server.terminate()
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
            log.close()
    shutil.rmtree(root)


def _cli(
    lab: SlurmLab, env: dict[str, str], *args: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return lab.run([sys.executable, "-m", "ringleader", *args], timeout=timeout, env=env)


def test_an_unchanged_ddp_script_runs_on_two_slurm_nodes_again_and_again(
    served: tuple[SlurmLab, dict[str, str]], tmp_path: Path
) -> None:
    lab, env = served
    for i in range(RUNS):
        started = time.monotonic()
        done = _cli(
            lab,
            env,
            *("run", "--gpus", "4", "--wait", "--name", f"ddp-{i}", "--workdir", str(tmp_path)),
            *("--", sys.executable, str(DDP), "--epochs", "1"),
            timeout=180,
        )
        assert done.returncode == 0, (done.stdout, done.stderr)
        assert "epoch 0 loss" in done.stdout
        assert time.monotonic() - started < 120
    listed = json.loads(_cli(lab, env, "jobs", "--json").stdout)
    jobs = listed["jobs"] if isinstance(listed, dict) else listed
    assert sorted(j["state"] for j in jobs) == ["succeeded"] * RUNS
    for job in jobs:  # each on two of the lab's nodes: 4 GPUs, 2 a node
        shown = _cli(lab, env, "show", job["id"]).stdout
        launched = re.search(r"launched 4 GPU\(s\) on (.*)", shown)
        assert launched is not None, shown
        devices = launched.group(1).split(", ")
        assert len({d.split(":")[0] for d in devices}) == 2, devices  # 2 nodes of the lab
