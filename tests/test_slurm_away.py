"""Slurm's controller goes away while jobs run (issue 60, bad input): no job is lost.

slurmctld is killed mid-run and started again 25 s later
(``ringleader.slurm.drill.controller_outage``). Meanwhile the server keeps
serving its API, says once why it holds every job, and takes a submission;
when Slurm answers again it picks up where it left off: the running job is
never stopped or launched again (the nodes slurmctld has not heard from yet
after its restart stay in the view), and the one submitted meanwhile runs.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from ringleader.slurm.conf import LabShape
from ringleader.slurm.drill import controller_outage, served
from ringleader.slurm.lab import SlurmLab, missing_tools

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the Slurm lab needs root (namespaces)"),
    pytest.mark.skipif(bool(missing_tools()), reason="no Slurm here: `make test` installs it"),
]
DDP = Path(__file__).parents[1] / "examples" / "porting" / "ddp.py"
JOB = (sys.executable, str(DDP), "--epochs", "30", "--sleep", "0.02")


def test_a_job_outlives_slurms_controller_going_away_and_coming_back(tmp_path: Path) -> None:
    root = Path("/run") / f"rl-slurm-away-{os.getpid()}"
    log = tmp_path / "server.log"
    with (
        SlurmLab(LabShape(nodes=3, gpus_per_node=2), root) as lab,
        served(lab, tmp_path / "state", log) as here,
    ):
        outage = controller_outage(here, JOB, tmp_path, away_s=16)
        cluster_after = here.get("/cluster")
    shutil.rmtree(root)
    said = log.read_text()
    history = "\n".join(outage["history"])
    assert outage["states"] == dict.fromkeys(outage["states"], "succeeded"), (outage, said[-3000:])
    assert outage["state_while_away"] == "running"
    assert history.count("what=launched") == 1 and "stop" not in history, history
    assert outage["submitted_while_away"], outage
    away = outage["cluster_while_away"]
    assert away["available"] is False and "Unable to contact slurm controller" in away["reason"]
    assert "the cluster does not answer" in outage["listing_while_away"]
    assert cluster_after["available"] is True and "reason" not in cluster_after
    assert outage["noticed_s"] is not None and outage["noticed_s"] < 20, outage
    assert "Traceback" not in said, said[-3000:]
    assert said.count("the cluster does not answer") == 1
