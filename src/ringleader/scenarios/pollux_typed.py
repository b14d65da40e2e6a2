"""Scenario ``pollux_typed``: Pollux's workloads on a cluster of three GPU types.

Issue 58's heterogeneous goal, after Sia's evaluation (SOSP'23 §6: Pollux's
applications on GPUs of several types): Pollux's bundled 160-job workloads
(``sim.pollux``), each job's speed on each type from Gavel's measured
throughputs (``perf.gpu_types``), on 64 GPUs: 6 nodes of 4 V100s, 5 of 4
P100s and 5 of 4 K80s. Pollux measured its profiles on one type; they stand
for the V100 here, and a job runs on another type at Gavel's ratio for the
job type nearest its application (``GAVEL_JOB_TYPES``), the same at every
count. Decisions every 60 s and 30 s per restart, as on Pollux's testbed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

from ringleader.perf.gpu_types import gavel_type_speeds
from ringleader.perf.measured import MeasuredJob
from ringleader.policy.model.plan import Decider
from ringleader.policy.model.views import ClusterView
from ringleader.sim import pollux
from ringleader.sim.engine import Simulator
from ringleader.sim.result import SimResult
from ringleader.sim.submitted import SimJob

CLUSTER: Mapping[str, tuple[int, int]] = {"v100": (6, 4), "p100": (5, 4), "k80": (5, 4)}
"""Nodes and GPUs per node of each type: 64 GPUs, as Pollux's testbed has."""

GAVEL_JOB_TYPES: Mapping[str, str] = {
    "cifar10": "ResNet-18 (batch size 128)",
    "imagenet": "ResNet-50 (batch size 64)",
    "bert": "Transformer (batch size 64)",
    "deepspeech2": "LM (batch size 20)",
    "yolov3": "CycleGAN",
    "ncf": "Recommendation (batch size 2048)",
}
"""Each Pollux application's nearest Gavel job type: the same network where Gavel
measured it (ResNet-18 and -50), else the same kind of model (attention, recurrent,
a convolutional image-to-image network, a recommender)."""


def cluster() -> ClusterView:
    return ClusterView.typed(CLUSTER)


def typed_jobs(
    workload: Path, models: Mapping[str, MeasuredJob] | None = None, *, adaptive: bool
) -> list[SimJob]:
    """``workload``'s jobs (``pollux.pollux_jobs``), each told its speed on every type."""
    apps = {row.name: row.application for row in pollux.read_workload(workload)}
    jobs = pollux.pollux_jobs(workload, pollux.DATA / "traces", models, adaptive=adaptive)
    return [
        dataclasses.replace(job, type_speed=gavel_type_speeds(GAVEL_JOB_TYPES[apps[job.id]]))
        for job in jobs
    ]


def play(jobs: list[SimJob], policy: Decider) -> SimResult:
    """``jobs`` under ``policy`` on the typed cluster, deciding every 60 s."""
    return Simulator(
        policy,
        cluster(),
        jobs,
        restart_delay_s=pollux.RESTART_S,
        round_s=pollux.ROUND_S,
        tick_s=pollux.ROUND_S,
    ).run()
