"""``ringleader fidelity --executor slurm`` (issue 60, item 4): sim vs real on the Slurm lab.

The lab's two nodes of two GPUs run a small workload's real jobs through a
Slurm-driven server, and the replay runs on the same two nodes, its workers
sharing this machine's cores as the lab's unpinned ranks do. Loose on
purpose, as in ``tests/test_fidelity.py``: the 5% goal is
``bench/fidelity.py --executor slurm``'s, on the example workload.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from ringleader.slurm.conf import LabShape
from ringleader.slurm.lab import SlurmLab, missing_tools

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the Slurm lab needs root (namespaces)"),
    pytest.mark.skipif(bool(missing_tools()), reason="no Slurm here: `make test` installs it"),
]
WORKLOAD = """\
version: 1
devices: %d
round_s: 5
jobs:
  - name: r8
    workload: resnet
    epochs: 6
    args: {depth: 8, examples-per-epoch: 1024, batch: 32, checkpoint-every-s: 2}
    submit_s: 0
    elastic: true
    max_gpus: 4
  - name: lm
    workload: transformer
    epochs: 8
    args: {examples-per-epoch: 2048, batch: 16, length: 32, width: 64, checkpoint-every-s: 2}
    submit_s: 3
    gpus: 1
"""


def test_fidelity_runs_the_real_jobs_on_slurm_and_replays_them_on_its_nodes(
    tmp_path: Path,
) -> None:
    root = Path("/run") / f"rl-slurm-fid-{os.getpid()}"
    fits, too_big = tmp_path / "fits.yaml", tmp_path / "big.yaml"
    fits.write_text(WORKLOAD % 4)
    too_big.write_text(WORKLOAD % 2)
    out = tmp_path / "out.json"
    fidelity = (sys.executable, "-m", "ringleader", "fidelity", "--executor", "slurm")
    with SlurmLab(LabShape(nodes=2, gpus_per_node=2), root) as lab:
        wrong = lab.run([*fidelity, str(too_big), "--policies", "elastic"], timeout=120)
        flags = ("--policies", "elastic", "--json", str(out), "--work-dir", str(tmp_path / "w"))
        done = lab.run([*fidelity, str(fits), *flags], timeout=400)
    shutil.rmtree(root)
    assert wrong.returncode != 0 and "has 4 GPUs" in wrong.stderr, wrong.stderr[-2000:]
    assert "Traceback" not in wrong.stderr
    assert done.returncode == 0, done.stderr[-3000:]
    real = json.loads((tmp_path / "w" / "elastic" / "real.json").read_text())
    assert real["executor"] == "slurm" and sorted(real["nodes"]) == [["n1", 2], ["n2", 2]]
    result = json.loads(out.read_text())["policies"]["elastic"]
    assert {j["name"] for j in result["jobs"]} == {"r8", "lm"}
    assert abs(result["sim_avg_jct_s"] / result["real_avg_jct_s"] - 1) < 0.25, result
