"""Known-truth real runs for the fidelity tests: three 1-worker jobs whose minibatch
times come from a small fixed-increment clock, independent of the simulator."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ringleader.fidelity.real import RealJob
from ringleader.fidelity.workload import FidelityWorkload

STEP_S = 0.1
"""Seconds per minibatch on a core of one's own."""
STARTUP_S = 0.4
PLAN: Mapping[str, tuple[float, int]] = {"a": (0.0, 100), "b": (1.0, 80), "c": (4.5, 60)}
"""Each job's submission time and minibatches."""

WORKLOAD = FidelityWorkload.model_validate(
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


def step_ends(speed: Callable[[str, list[str]], float]) -> dict[str, list[float]]:
    """When each job of ``PLAN`` ends each minibatch, where ``speed(job, loading)`` is its
    speed relative to alone while the jobs ``loading`` have launched and not finished
    (a launched worker loads the machine from launch: start-up takes CPU too)."""
    done = dict.fromkeys(PLAN, 0.0)
    times: dict[str, list[float]] = {name: [] for name in PLAN}
    t, dt = 0.0, 0.0005
    while any(len(times[n]) < PLAN[n][1] for n in PLAN):
        loading = [n for n, (at, total) in PLAN.items() if t >= at and len(times[n]) < total]
        for n in loading:
            if t < PLAN[n][0] + STARTUP_S:
                continue
            done[n] += dt * speed(n, loading) / STEP_S
            if done[n] >= len(times[n]) + 1 - 1e-9:
                times[n].append(round(t + dt, 6))
        t += dt
    return times


def real_jobs(
    times: Mapping[str, list[float]], devices: Mapping[str, tuple[str, int]]
) -> tuple[RealJob, ...]:
    """Each job of ``PLAN`` as the real run would record it: launched on its device at
    submission, its minibatches at ``times``, ended with the last."""
    jobs = []
    for name, (at, _) in PLAN.items():
        shape = {"examples_per_epoch": 320, "batch_per_worker": 32, "grad_bytes": 1e6}
        progress: list[dict[str, Any]] = [{"event": "started", "g": 1, "t": at + 0.1}]
        progress += [
            {"g": 1, "step": i + 1, "t": when, "world_size": 1, "step_time": STEP_S, **shape}
            for i, when in enumerate(times[name])
        ]
        launched = {"t": at, "kind": "launched", "generation": 1, "workers": 1}
        events = [
            {"t": at, "kind": "submitted"},
            {**launched, "devices": [list(devices[name])], "counted": "start"},
            {"t": times[name][-1], "kind": "succeeded", "generation": 1},
        ]
        jobs.append(
            RealJob(name, f"{name}-1", "succeeded", at, at, times[name][-1], events, progress)
        )
    return tuple(jobs)
