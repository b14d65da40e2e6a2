"""What a Ray node or rank that dies, or a rank that hangs, costs a job on Ray.

``python -m tests.ray_node_loss [--fault hang|worker] OUT.json RUNS COMMAND...``
(``bench/failures.py``'s Ray cases, run under ``ip netns exec``, in a namespace
with only loopback): a Ray cluster of a head (1 fake GPU) and two workers (2
each), a server with ``--executor ray`` and the ``elastic`` policy, and
``RUNS`` times: ``COMMAND`` as a 2-GPU job, one of its workers' nodes removed
half a checkpoint interval after its first checkpoint, a new worker node
added for the next run. With ``--fault hang`` the job has ``stall_s`` and
rank 1's training process is stopped instead (SIGSTOP: alive, holding its
GPU, no step), and kept stopped; with ``--fault worker`` it is killed
(SIGKILL). Writes each run's cost (the fields of
``ringleader.slurm.drill.cost``, ``noticed_s`` from the server's settling
event) to OUT.json. It stops only what it started.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from ringleader.slurm.drill import cost, hold_stopped, steps, training_process, wait
from tests.live_server import LiveServer

STORE = 80 * 2**20
CHECKPOINT_EVERY_S = 5.0
STALL_S = 10.0


def one_run(
    server: LiveServer, cluster: Any, command: str, state: Path, fault: str
) -> dict[str, Any]:
    spec: dict[str, Any] = {"name": "victim", "command": command, "gpus": 2}
    if fault != "node":
        spec["stall_s"] = STALL_S
    job = server.submit(spec)
    kept = state / "jobs" / job / "checkpoints"
    wait("checkpoint", lambda: kept.is_dir() and any(kept.iterdir()), 180)
    time.sleep(CHECKPOINT_EVERY_S / 2)
    hosts = {d.split(":")[0] for d in server.job(job)["devices"]}
    victim = next(w for w in cluster.worker_nodes if str(w.node_id)[:12] in hosts)
    if fault != "node":  # the fake nodes share this machine's process table
        pid = training_process(state, job, 1)
        failed_at, done = time.time(), steps(state, job, 1)
        if fault == "worker":
            os.kill(pid, signal.SIGKILL)
        else:
            threading.Thread(target=hold_stopped, args=(pid,), daemon=True).start()
    else:
        failed_at, done = time.time(), steps(state, job, 1)
        cluster.remove_node(victim)
        cluster.add_node(num_cpus=2, num_gpus=2, object_store_memory=STORE)
    final = server.wait_state(job, {"succeeded", "failed"}, 300)
    settled = [
        e["t"]
        for e in final["events"]
        if e["kind"] in ("stopped", "restarting") and e["t"] > failed_at
    ]
    return {
        "job": job,
        "state": final["state"],
        "attempts": final["attempts"],
        "victim": str(victim.node_id)[:12],
        "noticed_s": round(settled[0] - failed_at, 2) if settled else None,
        **cost(state, job, failed_at, done),
    }


def main(out: Path, runs: int, command: str, fault: str = "node") -> int:
    import ray
    from ray.cluster_utils import Cluster

    results: dict[str, Any] = {"runs": []}
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 2,
            "num_gpus": 1,
            "object_store_memory": STORE,
            "include_dashboard": False,
        },
    )
    for _ in range(2):
        cluster.add_node(num_cpus=2, num_gpus=2, object_store_memory=STORE)
    ray.init(address=cluster.address, namespace="ringleader-bench", log_to_driver=False)
    state = out.parent / "ray-failures"
    server = LiveServer(
        state, 1, 1.0, "--executor", "ray", "--address", cluster.address, "--policy", "elastic"
    )
    try:
        server.start()
        for _ in range(runs):
            try:
                results["runs"].append(one_run(server, cluster, command, state, fault))
            except Exception:
                results["runs"].append({"error": traceback.format_exc()})
    finally:
        server.stop()
        server.kill_workers()
        ray.shutdown()
        cluster.shutdown()
        out.write_text(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fault", choices=("node", "hang", "worker"), default="node")
    parser.add_argument("out", type=Path)
    parser.add_argument("runs", type=int)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    sys.exit(main(args.out, args.runs, " ".join(args.command), args.fault))
