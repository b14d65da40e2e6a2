"""Pollux's workloads on three GPU types (``scenarios.pollux_typed``): issue 58's
heterogeneous cluster, against which ``bench/goodput_typed.py`` plays the default and Sia."""

from __future__ import annotations

from ringleader.scenarios import pollux_typed
from ringleader.sim import pollux


def test_the_typed_cluster_has_pollux_testbeds_64_gpus_over_three_types() -> None:
    cluster = pollux_typed.cluster()
    assert cluster.capacity == pollux.NODES * pollux.GPUS_PER_NODE
    assert set(cluster.types) == {"v100", "p100", "k80"}


def test_every_job_is_told_its_speed_on_each_type_by_its_applications_gavel_job_type() -> None:
    workload = pollux.bundled_workload("workload-3")
    apps = {row.name: row.application for row in pollux.read_workload(workload)}
    assert set(apps.values()) <= pollux_typed.GAVEL_JOB_TYPES.keys()
    jobs = pollux_typed.typed_jobs(workload, adaptive=True)
    assert len(jobs) == len(apps)
    by_app = {apps[j.id]: j.type_speed for j in jobs}
    for app, speeds in by_app.items():
        assert speeds is not None and speeds["v100"] == 1.0, app
    # Gavel's spread: CycleGAN crawls on a K80; the recommender runs fastest on a P100.
    assert by_app["yolov3"]["k80"] < 0.2 < by_app["yolov3"]["p100"] < 1.0  # type: ignore[index]
    assert by_app["ncf"]["p100"] > 1.0  # type: ignore[index]
