"""The Slurm lab: real slurmctld, slurmd and munge, three nodes of two GPUs in namespaces.

Issue 60, item 2. Brought up once for the module (about 2 s) and taken down after,
when no process of it may be left and no namespace of it may remain.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from ringleader.slurm.conf import LabShape
from ringleader.slurm.lab import LabError, SlurmLab, missing_tools

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the Slurm lab needs root (namespaces)"),
    pytest.mark.skipif(
        bool(missing_tools()),
        reason="no Slurm here: `make test` installs it (apt-get install slurmctld slurmd "
        "slurm-client munge)",
    ),
]


@pytest.fixture(scope="module")
def lab() -> Iterator[SlurmLab]:
    root = Path("/run") / f"rl-slurm-test-{os.getpid()}"  # short: munge's socket path
    with SlurmLab(LabShape(nodes=3, gpus_per_node=2), root) as up:
        yield up
    shutil.rmtree(root)


def test_the_lab_has_three_idle_nodes_of_two_gpus(lab: SlurmLab) -> None:
    done = lab.run(["sinfo", "-h", "-N", "-o", "%P %N %t %G"])
    assert done.returncode == 0, done.stderr
    # The same nodes in both partitions: gpu (the default) and share (time-slicing).
    assert sorted(done.stdout.split("\n")[:-1]) == [
        f"{p} n{i} idle gpu:2" for p in ("gpu*", "share") for i in (1, 2, 3)
    ]
    shared = lab.run(["sinfo", "-h", "-o", "%P %h"]).stdout.split("\n")[:-1]
    assert sorted(shared) == ["gpu* NO", "share FORCE:4"]


def test_a_step_across_two_nodes_gets_its_ranks_and_gpus(lab: SlurmLab) -> None:
    done = lab.run(
        [
            *("srun", "-N2", "--ntasks-per-node=2", "--gres=gpu:2", "bash", "-c"),
            "echo $(hostname) $SLURM_PROCID $CUDA_VISIBLE_DEVICES",
        ]
    )
    assert done.returncode == 0, done.stderr
    rows = sorted(line.split() for line in done.stdout.splitlines())
    assert len({r[0] for r in rows}) == 2
    assert sorted(int(r[1]) for r in rows) == [0, 1, 2, 3]
    assert {r[2] for r in rows} == {"0,1"}


def test_a_second_lab_on_the_same_root_is_refused(lab: SlurmLab) -> None:
    with pytest.raises(LabError, match="already up"):
        SlurmLab(root=lab.root).up()


def test_down_leaves_no_process_and_no_namespace() -> None:
    root = Path("/run") / f"rl-slurm-down-{os.getpid()}"
    lab = SlurmLab(LabShape(nodes=1, gpus_per_node=1), root)
    lab.up()
    started = lab.run(["sbatch", "--wrap", "sleep 300", "-o", "/dev/null"])
    assert started.returncode == 0, started.stderr
    pids = [*lab.daemons.values(), *lab.holders.values()]
    spaces = {os.readlink(f"/proc/{p}/ns/net") for p in lab.holders.values()}
    lab.down()
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or _zombie(pid), pid
    left = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _net(p) in spaces]
    assert left == []
    assert not (root / "lab.json").exists()
    shutil.rmtree(root)


def _net(proc: Path) -> str | None:
    try:
        return os.readlink(proc / "ns" / "net")
    except OSError:
        return None


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True
