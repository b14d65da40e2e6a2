"""The Slurm executor on the real Slurm lab (issue 60, item 1): gangs as Slurm jobs.

The executor is driven as the controller drives it (launch, status, terminate),
its Slurm commands run on the lab's controller host.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ringleader.policy.model.views import Device
from ringleader.runtime.workers.executor.base import GangStatus
from ringleader.runtime.workers.executor.slurm import SlurmExecutor
from ringleader.slurm.client import Slurm
from ringleader.slurm.conf import LabShape
from ringleader.slurm.lab import SlurmLab, missing_tools

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the Slurm lab needs root (namespaces)"),
    pytest.mark.skipif(bool(missing_tools()), reason="no Slurm here: `make test` installs it"),
]
DDP = Path(__file__).parents[1] / "examples" / "porting" / "ddp.py"


@pytest.fixture(scope="module")
def lab() -> Iterator[SlurmLab]:
    root = Path("/run") / f"rl-slurm-exec-{os.getpid()}"
    with SlurmLab(LabShape(nodes=3, gpus_per_node=2), root) as up:
        yield up
    shutil.rmtree(root)


def _executor(lab: SlurmLab) -> SlurmExecutor:
    prefix = tuple(lab.on_controller([]))
    return SlurmExecutor(Slurm(prefix=prefix, env={"SLURM_CONF": str(lab.conf), **_path()}))


def _path() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


def _until_finished(ex: SlurmExecutor, job_dir: Path, world: int, within_s: float) -> GangStatus:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        status = ex.status(job_dir, 1, world)
        if status.finished and not status.lost:
            return status
        time.sleep(0.2)
    raise AssertionError(f"not finished in {within_s} s: {ex.status(job_dir, 1, world)}")


def test_the_cluster_is_the_labs_nodes_and_gpus(lab: SlurmLab) -> None:
    view = _executor(lab).cluster()
    assert sorted((n.name, n.gpus) for n in view.nodes) == [("n1", 2), ("n2", 2), ("n3", 2)]


def test_an_unchanged_ddp_script_runs_across_two_nodes(lab: SlurmLab, tmp_path: Path) -> None:
    ex = _executor(lab)
    devices = [Device("n1", 0), Device("n1", 1), Device("n2", 0), Device("n2", 1)]
    job_dir = tmp_path / "job"
    script = f"echo on $(hostname) as $RANK of $WORLD_SIZE; exec {sys.executable} {DDP} --epochs 2"
    ex.launch("ddp", job_dir, 1, ["sh", "-c", script], devices, {})
    status = _until_finished(ex, job_dir, 4, 120)
    logs = [(job_dir / "logs" / f"rank{r}.log").read_text() for r in range(4)]
    assert status.exits == {0: 0, 1: 0, 2: 0, 3: 0}, logs
    for rank, host in enumerate(("n1", "n1", "n2", "n2")):  # each rank where the Plan put it
        assert f"on {host} as {rank} of 4" in logs[rank]
    assert "epoch 1 loss" in logs[0]


def test_terminate_reaches_every_rank(lab: SlurmLab, tmp_path: Path) -> None:
    ex = _executor(lab)
    devices = [Device("n2", 0), Device("n3", 0)]
    job_dir = tmp_path / "job"
    ex.launch("sleeper", job_dir, 1, ["sleep", "300"], devices, {})
    deadline = time.monotonic() + 30
    while ex.status(job_dir, 1, 2).alive < 2:
        assert time.monotonic() < deadline, ex.status(job_dir, 1, 2)
        time.sleep(0.1)
    assert ex.terminate(job_dir, 1) == {0, 1}
    status = _until_finished(ex, job_dir, 2, 30)
    assert set(status.exits) == {0, 1} and all(code != 0 for code in status.exits.values())


def test_stopping_a_job_slurm_has_forgotten_is_no_error(lab: SlurmLab, tmp_path: Path) -> None:
    # slurmctld forgets an ended job after MinJobAge (or lost it in a restart): a
    # stop must not raise out of the controller's acting on it.
    ex = _executor(lab)
    job_dir = tmp_path / "job"
    ex.launch("short", job_dir, 1, ["true"], [Device("n1", 0)], {})
    _until_finished(ex, job_dir, 1, 60)
    ex._jobs[(job_dir.absolute(), 1)] = ("999999", frozenset({"n1"}))  # never Slurm's
    ex.terminate(job_dir, 1)
    ex.kill(job_dir, 1)
    assert ex.status(job_dir, 1, 1).exits == {0: 0}
