"""A node that dies under a job on the Slurm lab (issue 60, item 3): the job finishes.

One of the lab's nodes loses power mid-run (``SlurmLab.fail_node``: its cable
goes dead, then every process on it). The server notices as soon as Slurm
marks the node not responding, stops what is left of the gang, and restarts
the job from its last checkpoint on the nodes that are left
(``ringleader.slurm.drill``).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from ringleader.slurm.conf import LabShape
from ringleader.slurm.drill import node_failure, served
from ringleader.slurm.lab import SlurmLab, missing_tools

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the Slurm lab needs root (namespaces)"),
    pytest.mark.skipif(bool(missing_tools()), reason="no Slurm here: `make test` installs it"),
]
CHECKPOINT_EVERY_S = 5
JOB = (
    *(sys.executable, "-m", "ringleader.workloads.resnet", "--depth", "8", "--epochs", "6"),
    *("--examples-per-epoch", "2048", "--batch", "32"),
    *("--checkpoint-every-s", str(CHECKPOINT_EVERY_S)),
)


def test_a_job_whose_node_dies_restarts_from_its_checkpoint_on_the_nodes_left(
    tmp_path: Path,
) -> None:
    root = Path("/run") / f"rl-slurm-fail-{os.getpid()}"
    with (
        SlurmLab(LabShape(nodes=3, gpus_per_node=2), root) as lab,
        served(lab, tmp_path / "state", tmp_path / "server.log") as here,
    ):
        cost = node_failure(here, JOB, tmp_path, CHECKPOINT_EVERY_S / 2)
    shutil.rmtree(root)
    history = "\n".join(cost["history"])
    assert cost["state"] == "succeeded", (cost, (tmp_path / "server.log").read_text()[-3000:])
    assert "stopped for node_lost" in history, history
    relaunch = history.split("stopped for node_lost")[1].splitlines()[1]
    assert "launched" in relaunch and cost["failed_node"] not in relaunch, history
    # Restarted from its checkpoint: at most the steps since it are lost.
    assert cost["restored_step"] is not None, cost
    lost_s = cost["steps_lost"] * cost["step_s"]
    assert 0 <= lost_s <= CHECKPOINT_EVERY_S + 2 * cost["step_s"], cost
    # Noticed once Slurm has had no answer for SlurmdTimeout (10 s in the lab), not
    # once it marks the node DOWN and ends the job, some seconds later.
    assert cost["noticed_s"] is not None and cost["noticed_s"] < 20, cost
