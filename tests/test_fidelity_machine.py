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
from typing import Any

import pytest

from ringleader.fidelity import compare, measure, replay
from ringleader.fidelity.machine import MachineLoad, busy_cpu_s, workers_cpu_s
from ringleader.fidelity.real import RealJob, RealRun
from ringleader.fidelity.workload import FidelityWorkload
from ringleader.runtime.workers.wrapper import run_dir

STEP_S = 0.1
STARTUP_S = 0.4
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


def _unpinned_run(machine: MachineLoad | None) -> tuple[RealRun, FidelityWorkload]:
    """Three 1-worker jobs on a Slurm-like lab of two 2-GPU nodes, unpinned on 2 cores of
    which the workers had ``CORES_LEFT``: each computes a minibatch in ``STEP_S`` on a core
    of its own, slower once the busy workers outnumber ``CORES_LEFT``."""
    plan = {"a": (0.0, ("n1", 0), 100), "b": (1.0, ("n1", 1), 80), "c": (4.5, ("n2", 0), 60)}
    done = dict.fromkeys(plan, 0.0)
    times: dict[str, list[float]] = {name: [] for name in plan}
    t, dt = 0.0, 0.0005
    while any(len(times[n]) < plan[n][2] for n in plan):
        loading = [n for n, (at, _, total) in plan.items() if t >= at and len(times[n]) < total]
        speed = min(1.0, CORES_LEFT / max(len(loading), 1))
        for n in loading:
            if t < plan[n][0] + STARTUP_S:
                continue
            done[n] += dt * speed / STEP_S
            if done[n] >= len(times[n]) + 1 - 1e-9:
                times[n].append(round(t + dt, 6))
        t += dt
    jobs = []
    for name, (at, device, _) in plan.items():
        shape = {"examples_per_epoch": 320, "batch_per_worker": 32, "grad_bytes": 1e6}
        progress: list[dict[str, Any]] = [{"event": "started", "g": 1, "t": at + 0.1}]
        progress += [
            {"g": 1, "step": i + 1, "t": when, "world_size": 1, "step_time": STEP_S, **shape}
            for i, when in enumerate(times[name])
        ]
        launched = {"t": at, "kind": "launched", "generation": 1, "workers": 1}
        events = [
            {"t": at, "kind": "submitted"},
            {**launched, "devices": [list(device)], "counted": "start"},
            {"t": times[name][-1], "kind": "succeeded", "generation": 1},
        ]
        jobs.append(
            RealJob(name, f"{name}-1", "succeeded", at, at, times[name][-1], events, progress)
        )
    workload = FidelityWorkload.model_validate(
        {
            "devices": 4,
            "round_s": 10,
            "jobs": [
                {"name": "a", "workload": "resnet", "epochs": 10},
                {"name": "b", "workload": "resnet", "epochs": 8, "submit_s": 1.0},
                {"name": "c", "workload": "resnet", "epochs": 6, "submit_s": 4.5},
            ],
        }
    )
    nodes = (("n1", 2), ("n2", 2))
    return RealRun("fifo", 4, (0, 1), 10.0, tuple(jobs), "slurm", nodes, machine), workload


def test_the_replay_leaves_the_workers_the_cores_the_rest_did_not_keep_busy() -> None:
    background = 2.0 - CORES_LEFT
    run, workload = _unpinned_run(MachineLoad(100.0, 150.0, 150.0 - 100.0 * background))
    measured = measure(run)
    assert any("kept 0.50 of its 2 cores busy" in note for note in measured.notes)
    for name in ("a", "b", "c"):
        assert measured.jobs[name].step_times[1] == pytest.approx(STEP_S, rel=0.02)
    result = compare(run, measured, replay(run, measured, workload), wall_s=0.0)
    assert abs(result.avg_jct_error) < 0.01
    # Without the machine's load, the slowdown of sharing 1.5 cores is read as slower
    # minibatches on cores of their own.
    blind, _ = _unpinned_run(None)
    assert measure(blind).jobs["c"].step_times[1] > 1.1 * STEP_S
