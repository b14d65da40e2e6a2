"""Launch and resize latency: the Ray executor against the local one, same job.

A ResNet-20 job (16 images per minibatch) through each executor, ``RUNS``
times: *launch* is executor.launch → the job has restored (or started
fresh) and is about to train its first minibatch; *resize* is the stop
request at a minibatch boundary → the job restored on 2 workers (for Ray, on
two different nodes). The Ray cluster (two nodes with two fake GPUs each) is
started here, inside a loopback-only network namespace this script creates
and removes (root needed). Writes bench/results/ray.json.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import resnet_command, stamp, wait_until

OUT = Path(__file__).parent / "results" / "ray.json"
RUNS = int(os.environ.get("RAY_BENCH_RUNS", "5"))
STORE = 80 * 2**20


def _command() -> list[str]:
    return resnet_command(20, 16, 1000)


def one_run(executor: Any, one: list[Any], two: list[Any]) -> dict[str, float]:
    from ringleader.job.control import PROGRESS, Action, Control, ProgressReader, write_control

    job_dir = Path(tempfile.mkdtemp(prefix=f"raybench-{executor.name}-"))
    reader = ProgressReader(job_dir / PROGRESS)
    records: list[dict[str, Any]] = []

    def seen(pred: Any) -> Any:
        records.extend(reader.read_new())
        return next((r for r in records if pred(r)), None)

    write_control(job_dir, Control(1, Action.RUN))
    began = time.time()
    executor.launch(job_dir.name, job_dir, 1, _command(), one, {})
    started = wait_until(lambda: seen(lambda r: r.get("event") == "started" and r.get("g") == 1))
    wait_until(lambda: seen(lambda r: r.get("g") == 1 and r.get("step", 0) >= 5 and "loss" in r))
    requested = time.time()
    write_control(job_dir, Control(1, Action.STOP))
    wait_until(lambda: seen(lambda r: r.get("event") == "stopped"))
    wait_until(lambda: executor.status(job_dir, 1, 1).finished)
    write_control(job_dir, Control(2, Action.RUN))
    executor.launch(job_dir.name, job_dir, 2, _command(), two, {})
    restored = wait_until(lambda: seen(lambda r: r.get("event") == "started" and r.get("g") == 2))
    write_control(job_dir, Control(2, Action.STOP))
    wait_until(lambda: executor.status(job_dir, 2, 2).finished)
    return {"launch": started["t_restored"] - began, "resize": restored["t_restored"] - requested}


def _summary(runs: list[dict[str, float]]) -> dict[str, Any]:
    out: dict[str, Any] = {"runs": len(runs)}
    for key in ("launch", "resize"):
        values = sorted(r[key] for r in runs)
        out[key] = {
            "median_s": round(statistics.median(values), 3),
            "max_s": round(values[-1], 3),
        }
    return out


def inside() -> dict[str, Any]:
    import ray
    from ray.cluster_utils import Cluster

    from ringleader.policy.model.views import Device
    from ringleader.runtime.workers.executor.local import LocalExecutor
    from ringleader.runtime.workers.executor.ray import RayExecutor

    report: dict[str, Any] = {
        "what": __doc__.split("\n")[0],
        **stamp("python bench/ray_executor.py"),
        "cpus": os.cpu_count(),
    }
    local = LocalExecutor(gpus=2)
    node = local.cluster().nodes[0].name
    report["local"] = _summary(
        [one_run(local, [Device(node, 0)], [Device(node, 0), Device(node, 1)]) for _ in range(RUNS)]
    )
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 2,
            "num_gpus": 2,
            "object_store_memory": STORE,
            "include_dashboard": False,
        },
    )
    cluster.add_node(num_cpus=2, num_gpus=2, object_store_memory=STORE)
    try:
        executor = RayExecutor(cluster.address)
        a, b = (n.name for n in executor.cluster().nodes)
        report["ray"] = _summary(
            [one_run(executor, [Device(a, 0)], [Device(a, 0), Device(b, 0)]) for _ in range(RUNS)]
        )
    finally:
        ray.shutdown()
        cluster.shutdown()
    report["ray_over_local"] = {
        key: round(report["ray"][key]["median_s"] / report["local"][key]["median_s"], 2)
        for key in ("launch", "resize")
    }
    return report


def main() -> None:
    if os.environ.get("RINGLEADER_BENCH_NETNS"):
        report = inside()
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text(json.dumps(report, indent=2) + "\n")
        print(json.dumps(report, indent=2))
        return
    if os.geteuid() != 0:
        sys.exit("bench/ray_executor.py needs root: it runs Ray in a network namespace it makes")
    ns = f"rlbench{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"], check=True)
        env = {**os.environ, "RINGLEADER_BENCH_NETNS": "1", "RAY_USAGE_STATS_ENABLED": "0"}
        code = subprocess.run(
            ["ip", "netns", "exec", ns, sys.executable, __file__], env=env, check=False
        ).returncode
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)
    sys.exit(code)


if __name__ == "__main__":
    main()
