"""Ray scenarios on a real multi-node Ray cluster, run inside a loopback-only netns.

``python -m tests.ray_harness OUT.json`` (run by tests/test_ray.py under
``ip netns exec``): starts a Ray cluster of three nodes on this machine with
declared fake GPUs (head: 1, two workers: 2 each), runs ringleader servers
with ``--executor ray`` against it, and writes what it observed to OUT.json
for the test to judge. It stops only what it started.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from tests.live_server import LiveServer, tiny_job, wait_for

STORE = 80 * 2**20


def _steps(progress: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in progress if "loss" in r]


def resize_across_nodes(server: LiveServer) -> dict[str, Any]:
    """An elastic job grows 1 -> 2 -> 4 workers; 4 is more than any node has."""
    job = server.submit(tiny_job("grow", epochs=3000, elastic=True, max_gpus=4))
    wait_for(
        lambda: server.job(job)["gpus"] == 4 and server.job(job)["step"] > 0,
        180,
        "the elastic job to reach 4 workers",
    )
    step_at_4 = server.job(job)["step"]
    wait_for(lambda: server.job(job)["step"] > step_at_4 + 20, 120, "training at 4 workers")
    detail = server.job(job)
    progress = server.progress(job)
    server.cancel(job)
    server.wait_state(job, {"cancelled", "succeeded", "failed"}, 120)
    return {
        "devices": detail["devices"],
        "world_sizes": [r["world_size"] for r in _steps(progress)],
        "steps": [r["step"] for r in _steps(progress)],
        "losses": [r["loss"] for r in _steps(progress)],
        "stops": [r for r in progress if r.get("event") == "stopped"],
        "starts": [r for r in progress if r.get("event") == "started"],
    }


def node_loss(server: LiveServer, cluster: Any, removable: dict[str, Any]) -> dict[str, Any]:
    """A 2-GPU job's node is removed mid-run: it restarts from its checkpoint elsewhere."""
    job = server.submit(tiny_job("survivor", epochs=80, ckpt=0.5, gpus=2))
    wait_for(lambda: server.job(job)["step"] > 30, 120, "the job to train a while")
    nodes = {d.split(":")[0] for d in server.job(job)["devices"]}
    victim = next(name for name in removable if name in nodes)
    step_before = server.job(job)["step"]
    cluster.remove_node(removable.pop(victim))
    final = server.wait_state(job, {"succeeded", "failed"}, 240)
    progress = server.progress(job)
    return {
        "victim": victim,
        "step_before": step_before,
        "state": final["state"],
        "devices_after": final["devices"],
        "events": [e["kind"] for e in final["events"]],
        "starts": [r for r in progress if r.get("event") == "started"],
        "steps": [r["step"] for r in _steps(progress)],
        "generations": [r["g"] for r in _steps(progress)],
        "attempts": final["attempts"],
    }


def crash(server: LiveServer) -> dict[str, Any]:
    """Rank 1 of a 2-GPU job fails while rank 0 runs on: the restart is the job's
    failure, charged to its retries (Ray's kill takes the actors, which must not
    read as ranks lost with a node, or the job would relaunch for ever)."""
    script = 'if [ "$RANK" = 1 ]; then sleep 1; exit 3; fi; sleep 120'
    job = server.submit(
        {"name": "crasher", "command": f"sh -c '{script}'", "gpus": 2, "retries": 1}
    )
    final = server.wait_state(job, {"succeeded", "failed"}, 120)
    return {
        "state": final["state"],
        "attempts": final["attempts"],
        "events": [e["kind"] for e in final["events"]],
    }


def time_slicing(server: LiveServer) -> dict[str, Any]:
    """Two jobs on the one GPU left: they take turns.

    Each trains for about three quanta (30 epochs, some 4-5 s against the 2 s
    quantum): at 10 epochs a job could finish within the quantum it started in
    (quanta are aligned to the clock), and then nobody was ever suspended."""
    ids = [server.submit(tiny_job(f"turn{i}", epochs=30)) for i in range(2)]
    for job_id in ids:
        server.wait_state(job_id, {"succeeded", "failed"}, 240)
    return {
        job_id: {
            "state": server.job(job_id)["state"],
            "events": [e["kind"] for e in server.job(job_id)["events"]],
            "spans": [(r["t"] - r["step_time"], r["t"]) for r in _steps(server.progress(job_id))],
            "devices": [
                e.get("devices") for e in server.job(job_id)["events"] if e["kind"] == "launched"
            ],
        }
        for job_id in ids
    }


def main(out: Path) -> int:
    import ray
    from ray.cluster_utils import Cluster

    results: dict[str, Any] = {}
    began = time.monotonic()
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 2,
            "num_gpus": 1,
            "object_store_memory": STORE,
            "include_dashboard": False,
        },
    )
    workers = [
        cluster.add_node(num_cpus=2, num_gpus=2, object_store_memory=STORE) for _ in range(2)
    ]
    ray.init(address=cluster.address, namespace="ringleader-harness", log_to_driver=False)
    removable = {}
    for node in ray.nodes():
        for w in workers:
            if node["NodeID"] == w.node_id:
                removable[str(node["NodeID"])[:12]] = w
    results["cluster_up_s"] = time.monotonic() - began
    results["nodes"] = len(ray.nodes())
    state = out.parent / "ray-state"
    state.mkdir(parents=True, exist_ok=True)
    config = state / "exploratory.yaml"
    # Exploratory profiling probes 1, 2 then 4 workers: three real resizes.
    config.write_text("policy: exploratory\nprobe_window_s: 4\nround_s: 1\n")
    server = LiveServer(
        state / "elastic",
        1,
        1.0,
        "--executor",
        "ray",
        "--address",
        cluster.address,
        "--config",
        str(config),
    )
    try:
        server.start()
        results["cluster"] = server.cluster()
        for name, run in (
            ("resize", lambda: resize_across_nodes(server)),
            ("crash", lambda: crash(server)),
            ("node_loss", lambda: node_loss(server, cluster, removable)),
        ):
            began_part = time.monotonic()
            try:
                results[name] = run()
            except Exception:
                results[name] = {"error": traceback.format_exc()}
            results[f"{name}_s"] = time.monotonic() - began_part
        server.stop()
        for w in list(removable.values()):
            cluster.remove_node(w)  # leave the head's single GPU
        server = LiveServer(
            state / "slicing",
            1,
            1.0,
            "--executor",
            "ray",
            "--address",
            cluster.address,
            "--policy",
            "time-slicing",
            "--quantum-s",
            "2",
        )
        server.start()
        results["cluster_after"] = server.cluster()
        began_part = time.monotonic()
        try:
            results["time_slicing"] = time_slicing(server)
        except Exception:
            results["time_slicing"] = {"error": traceback.format_exc()}
        results["time_slicing_s"] = time.monotonic() - began_part
        cluster.add_node(num_cpus=1, num_gpus=2, object_store_memory=STORE)
        try:
            wait_for(lambda: server.cluster()["gpus"] == 3, 60, "the new node to be listed")
            results["cluster_joined"] = server.cluster()
        except AssertionError:
            results["cluster_joined"] = {"error": traceback.format_exc()}
    finally:
        server.stop()
        server.kill_workers()
        ray.shutdown()
        cluster.shutdown()
        results["total_s"] = time.monotonic() - began
        out.write_text(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    sys.exit(main(Path(sys.argv[1])))
