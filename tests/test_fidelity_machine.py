"""A fidelity run on an unpinned machine counts what else kept its cores busy.

On the Slurm lab the daemons, the server and its clients share this host's
cores with the workers; the real run measures their CPU time beside the
workers' (``fidelity.machine``) and the replay leaves the workers the rest.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ringleader.fidelity import compare, measure, replay
from ringleader.fidelity.machine import MachineLoad, busy_cpu_s, workers_cpu_s
from ringleader.fidelity.real import RealRun
from ringleader.runtime.workers.wrapper import run_dir
from tests.fidelity_runs import STEP_S, WORKLOAD, real_jobs, step_ends

CORES_LEFT = 1.5
"""Of the machine's 2 cores, what the workers had: the rest was the lab's."""


def test_background_cores_are_the_machines_busy_time_less_the_workers() -> None:
    load = MachineLoad(wall_s=100.0, busy_cpu_s=180.0, worker_cpu_s=150.0)
    assert load.background_cores == pytest.approx(0.3)
    assert MachineLoad(100.0, 10.0, 20.0).background_cores == 0.0  # never below nothing
    assert MachineLoad(0.0, 10.0, 0.0).background_cores == 0.0


def test_busy_time_leaves_idle_and_iowait_out(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    # user nice system idle iowait irq softirq steal guest guest_nice
    stat.write_text("cpu  100 20 30 1000 50 5 5 0 40 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n")
    ticks = 100 + 20 + 30 + 5 + 5
    assert busy_cpu_s(stat) * os.sysconf("SC_CLK_TCK") == pytest.approx(ticks)
    assert busy_cpu_s() > 0  # this machine's own


def test_a_wrapper_records_its_workers_cpu_time(tmp_path: Path) -> None:
    jobs, job_dir = tmp_path / "jobs", tmp_path / "jobs" / "j"
    burn = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\n"
    wrapper = [sys.executable, "-m", "ringleader.runtime.workers.launch"]
    args = ["--job-dir", str(job_dir), "--generation", "1", "--rank", "0"]
    done = subprocess.run([*wrapper, *args, "--", sys.executable, "-c", burn], timeout=60)
    assert done.returncode == 0
    used = float((run_dir(job_dir, 1) / "rank0.cpu").read_text())
    assert 0.3 <= used < 5.0
    assert workers_cpu_s(jobs) == pytest.approx(used)  # ``jobs/<job>/run/gen*/rank*.cpu``
    (run_dir(job_dir, 1) / "rank1.cpu").write_text("not a number\n")
    assert workers_cpu_s(jobs) == pytest.approx(used)


def _unpinned_run(machine: MachineLoad | None) -> RealRun:
    """Three 1-worker jobs on a Slurm-like lab of two 2-GPU nodes, unpinned on 2 cores of
    which the workers had ``CORES_LEFT``: each computes a minibatch in ``STEP_S`` on a core
    of its own, slower once the busy workers outnumber ``CORES_LEFT``."""

    def speed(job: str, loading: list[str]) -> float:
        return min(1.0, CORES_LEFT / max(len(loading), 1))

    devices = {"a": ("n1", 0), "b": ("n1", 1), "c": ("n2", 0)}
    jobs = real_jobs(step_ends(speed), devices)
    return RealRun("fifo", 4, (0, 1), 10.0, jobs, "slurm", (("n1", 2), ("n2", 2)), machine)


def test_the_replay_leaves_the_workers_the_cores_the_rest_did_not_keep_busy() -> None:
    background = 2.0 - CORES_LEFT
    run = _unpinned_run(MachineLoad(100.0, 150.0, 150.0 - 100.0 * background))
    measured = measure(run)
    assert any("kept 0.50 of its 2 cores busy" in note for note in measured.notes)
    for name in ("a", "b", "c"):
        assert measured.jobs[name].step_times[1] == pytest.approx(STEP_S, rel=0.02)
    result = compare(run, measured, replay(run, measured, WORKLOAD), wall_s=0.0)
    assert abs(result.avg_jct_error) < 0.01
    # Without the machine's load, the slowdown of sharing 1.5 cores is read as slower
    # minibatches on cores of their own.
    blind = _unpinned_run(None)
    assert measure(blind).jobs["c"].step_times[1] > 1.1 * STEP_S
