"""The real half of a fidelity run: the workload's jobs on a local ``ringleader server``.

Starts a server with the policy in a fresh state directory, submits each job
at its arrival time, waits for all of them to end, and keeps what the runtime
recorded: each job's events (launches with their devices, stops, suspends)
from the API and its progress file (every minibatch, start, suspend, resume)
from its job directory. The replay measures everything it needs from these.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from ringleader.fidelity.machine import MachineLoad, busy_cpu_s, workers_cpu_s
from ringleader.fidelity.workload import FidelityWorkload
from ringleader.job.control import PROGRESS, ProgressReader
from ringleader.policy.catalog import policy_from_config
from ringleader.policy.gandiva.sharing import Sharing
from ringleader.runtime.local_server import local_server

TERMINAL = frozenset({"succeeded", "failed", "cancelled"})
Progress = Callable[[float, list[dict[str, Any]]], None]
"""Called about once a second with the seconds elapsed and every job as the API shows it."""


class RealRunError(RuntimeError):
    """The real run could not finish; the message says which jobs and where the log is."""


@dataclass(frozen=True, slots=True)
class RealJob:
    name: str
    id: str
    state: str
    submitted_at: float
    started_at: float | None
    finished_at: float | None
    events: list[dict[str, Any]]
    progress: list[dict[str, Any]]

    @property
    def jct_s(self) -> float | None:
        if self.state != "succeeded" or self.finished_at is None:
            return None
        return self.finished_at - self.submitted_at


@dataclass(frozen=True, slots=True)
class RealRun:
    policy: str
    devices: int
    cores: tuple[int, ...]
    """The CPU cores the server's workers were pinned to."""
    round_s: float
    jobs: tuple[RealJob, ...]
    executor: str = "local"
    nodes: tuple[tuple[str, int], ...] = ()
    """Each node's name and GPUs, as the server listed them (empty: one node of ``devices``)."""
    machine: MachineLoad | None = None
    """The machine's CPU time over the run, the workers' and all of it (None: a run
    recorded before it was measured)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RealRun:
        jobs = tuple(RealJob(**j) for j in data["jobs"])
        nodes = tuple((str(n), int(g)) for n, g in data.get("nodes", ()))
        machine = data.get("machine")
        return cls(
            data["policy"],
            data["devices"],
            tuple(data["cores"]),
            data["round_s"],
            jobs,
            data.get("executor", "local"),
            nodes,
            MachineLoad(**machine) if machine else None,
        )


def run_real(
    workload: FidelityWorkload,
    policy: str,
    work_dir: Path,
    *,
    timeout_s: float,
    on_progress: Progress | None = None,
    executor: str = "local",
) -> RealRun:
    """Run ``workload`` under ``policy`` on a server started here; ``work_dir`` keeps its
    state and log. ``executor``: ``local`` (the workload's devices, virtual), or
    ``slurm`` (the Slurm cluster this host's commands reach, which must have as many
    GPUs as the workload's devices)."""
    check_unused(work_dir)
    state = work_dir / "state"
    state.mkdir(parents=True, exist_ok=True)
    log = work_dir / "server.log"
    with (
        local_server(
            gpus=workload.devices,
            state_dir=state,
            log=log,
            round_s=workload.round_s,
            policy=policy,
            quantum_s=workload.quantum_s,
            executor=executor,
        ) as served,
        served.client() as client,
    ):
        nodes = _nodes(client, workload.devices, executor)
        _to_quantum_boundary(policy, workload.quantum_s)
        began, busy = time.monotonic(), busy_cpu_s()
        jobs = _submit_and_wait(client, workload.submissions(), timeout_s, log, on_progress)
        machine = MachineLoad(
            time.monotonic() - began, busy_cpu_s() - busy, workers_cpu_s(state / "jobs")
        )
        real = tuple(_collect(client, state, j) for j in jobs)
    cores = tuple(sorted(os.sched_getaffinity(0)))
    return RealRun(
        policy, workload.devices, cores, workload.round_s, real, executor, nodes, machine
    )


def check_unused(work_dir: Path) -> None:
    """``RealRunError`` where ``work_dir`` holds an earlier run's server state: its server
    would list that run's jobs beside this one's."""
    state = work_dir / "state"
    if state.is_dir() and any(state.iterdir()):
        raise RealRunError(
            f"{work_dir} already holds a real run (its state/ folder): give --work-dir a "
            "new or empty folder, or move that one away"
        )


def _nodes(client: httpx.Client, devices: int, executor: str) -> tuple[tuple[str, int], ...]:
    """The server's nodes; on an executor with a cluster of its own, as many GPUs as the
    workload's ``devices``, or ``RealRunError`` saying how many there are."""
    shown = client.get("/cluster").json()
    nodes = tuple((str(n["name"]), int(n["gpus"])) for n in shown["nodes"])
    gpus = sum(g for _, g in nodes)
    if gpus != devices:
        listed = ", ".join(f"{n} ({g})" for n, g in nodes) or "none"
        raise RealRunError(
            f"the {executor} cluster has {gpus} GPUs ({listed}) and the "
            f"workload's devices are {devices}: make them the same (a partition of that size)"
        )
    return nodes


def _to_quantum_boundary(policy: str, quantum_s: float | None) -> None:
    """Start a time-slicing policy's run on a quantum boundary (waiting at most one quantum).

    Quanta turn over at multiples of the quantum on the clock, so where the
    arrivals fall between boundaries would otherwise change from run to run;
    from a boundary, the file's ``submit_s`` times say where they fall, and
    the replay (which keeps the clock's phase) sees the same.
    """
    decider = policy_from_config(policy, quantum_s=quantum_s)
    if isinstance(decider, Sharing) and decider.time_slicing:
        q = decider.quantum_s
        time.sleep((-time.time()) % q)


def _submit_and_wait(
    client: httpx.Client,
    submissions: Sequence[tuple[float, dict[str, Any]]],
    timeout_s: float,
    log: Path,
    on_progress: Progress | None,
) -> list[dict[str, Any]]:
    start = time.monotonic()
    pending = list(submissions)
    while True:
        elapsed = time.monotonic() - start
        while pending and pending[0][0] <= elapsed:
            _, spec = pending.pop(0)
            client.post("/jobs", json=spec).raise_for_status()
        jobs: list[dict[str, Any]] = client.get("/jobs").json()
        if on_progress is not None:
            on_progress(elapsed, jobs)
        if not pending and all(j["state"] in TERMINAL for j in jobs):
            return jobs
        if elapsed > timeout_s:
            for j in jobs:
                if j["state"] not in TERMINAL:
                    client.delete(f"/jobs/{j['id']}")
            unfinished = sorted(j["name"] for j in jobs if j["state"] not in TERMINAL)
            raise RealRunError(
                f"jobs {', '.join(unfinished)} did not finish within {timeout_s:.0f} s "
                f"(cancelled; server log: {log})"
            )
        time.sleep(0.5 if pending and pending[0][0] - elapsed < 1 else 1.0)


def _collect(client: httpx.Client, state: Path, job: dict[str, Any]) -> RealJob:
    events = client.get(f"/jobs/{job['id']}").json()["events"]
    reader = ProgressReader(state / "jobs" / job["id"] / PROGRESS)
    progress: list[dict[str, Any]] = []
    while chunk := reader.read_new():
        progress += chunk
    return RealJob(
        name=job["name"],
        id=job["id"],
        state=job["state"],
        submitted_at=job["submitted_at"],
        started_at=job["started_at"],
        finished_at=job["finished_at"],
        events=events,
        progress=progress,
    )


def save_run(run: RealRun, path: Path) -> None:
    path.write_text(json.dumps(run.to_json()) + "\n")
