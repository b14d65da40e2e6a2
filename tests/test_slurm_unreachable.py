"""``ringleader server --executor slurm`` where Slurm does not answer (issue 60, bad
input): exit 2, Slurm's own words, and what to set, never a traceback."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ringleader.runtime.workers.executor.local import free_port

pytestmark = pytest.mark.skipif(shutil.which("sinfo") is None, reason="no Slurm client here")

NOWHERE = """\
ClusterName=nowhere
SlurmctldHost=localhost
SlurmctldPort=9
AuthType=auth/none
NodeName=n1 CPUs=1 State=UNKNOWN
PartitionName=p Nodes=n1 Default=YES
"""


def test_a_server_whose_slurm_does_not_answer_exits_2_naming_slurm_conf(tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text(NOWHERE)  # a controller where nothing listens (port 9, discard)
    server = [sys.executable, "-m", "ringleader", "server", "--executor", "slurm"]
    where = ["--state-dir", str(tmp_path / "state"), "--port", str(free_port())]
    done = subprocess.run(
        [*server, *where, "--no-isolate-jobs"],
        capture_output=True,
        text=True,
        env={**os.environ, "SLURM_CONF": str(conf)},
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "Slurm did not answer" in done.stderr and "Unable to contact" in done.stderr
    assert "SLURM_CONF" in done.stderr and "--slurm-url" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout
