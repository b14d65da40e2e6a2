"""How fast the control plane keeps a cluster full: a queue of short jobs drained for real.

A ``ringleader server`` with 32 virtual devices gets ``JOBS`` submissions of
a one-second job (``bash -c '...; sleep 1; ...'``, one GPU each) as fast as one HTTP client can
send them. Each job stamps, in its own log, the wall time its process
started and the time it was about to exit. Reported (issue 19):

* **drain** (``--repeat`` times, a fresh server each): seconds from the
  first submit to the last job's end (ideal: ``JOBS / 32`` seconds of
  sleeping; target ≤ 45 s for 1,000 jobs);
* **handover**: for every GPU, from one job's process exit to the next job's
  process start on that GPU, while jobs were still queued (target p99 < 250 ms);
* **restart**: a server started on a store with ``HISTORY`` finished jobs,
  seconds from its process start until ``/health`` and a first page of
  ``GET /jobs`` answer (target ≤ 5 s for 100,000).

Writes bench/results/control-plane.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx

from _common import stamp, wait_until
from ringleader.runtime.local_server import local_server
from ringleader.runtime.state.rows import State
from ringleader.runtime.state.spec import parse_spec
from ringleader.runtime.state.store import Store

OUT = Path(__file__).parent / "results" / "control-plane.json"
GPUS = 32
STAMPED = 'echo "start $EPOCHREALTIME"; sleep 1; echo "end $EPOCHREALTIME"'
"""Run by bash: ``EPOCHREALTIME`` is read in the shell itself, so the stamps are
the job's first and last moments, not those of a ``date`` process it forks."""
TARGETS = {"drain_s": 45.0, "handover_p99_ms": 250.0, "restart_s": 5.0}


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _stamps(log: Path) -> tuple[float, float] | None:
    """When a job's process started and when it was about to end."""
    said = {}
    for line in log.read_text(errors="replace").splitlines():
        word, _, value = line.partition(" ")
        said[word] = value
    if not {"start", "end"} <= said.keys():
        return None
    return float(said["start"]), float(said["end"])


def _device(row: dict[str, Any]) -> str:
    """The GPU a one-GPU job was launched on, from its history."""
    launches = [e for e in row["events"] if e["kind"] == "launched"]
    if len(launches) != 1:
        raise RuntimeError(f"job {row['id']} was launched {len(launches)} times, not once")
    return json.dumps(launches[0]["devices"])


def _ms(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    return {
        "median": round(statistics.median(values), 1),
        "p99": round(_percentile(values, 0.99), 1),
        "max": round(max(values), 1),
    }


def drain(jobs: int, base: Path) -> dict[str, Any]:
    """Submit ``jobs`` one-second jobs to 32 GPUs; time the drain and every handover.

    Handovers are also given apart for the submission burst (this process
    sending as fast as it can, on the same cores) and after it.
    """
    state = base / "drain"
    base.mkdir(parents=True, exist_ok=True)
    with local_server(gpus=GPUS, state_dir=state, log=base / "drain.log", round_s=30) as served:
        api = served.client()
        spec = {"name": "tick", "command": ["bash", "-c", STAMPED]}
        first = time.time()
        ids = []
        for _ in range(jobs):
            r = api.post("/jobs", json=spec)
            r.raise_for_status()
            ids.append(r.json()["id"])
        submitted = time.time()

        def done() -> bool:
            r = api.get("/jobs", params={"state": "queued,running", "limit": 1})
            return not r.json()

        wait_until(done, timeout=600, poll_s=0.25)
        rows = []
        for job in ids:
            row = api.get(f"/jobs/{job}").json()
            if row["state"] != "succeeded":
                raise RuntimeError(f"job {job} ended {row['state']}")
            rows.append(row)
    runs: dict[str, list[tuple[float, float]]] = defaultdict(list)
    spans = []
    for row in rows:
        stamped = _stamps(state / "jobs" / row["id"] / "logs" / "rank0.log")
        if stamped is None:
            raise RuntimeError(f"job {row['id']} left no start/end stamps")
        spans.append(stamped)
        runs[_device(row)].append(stamped)
    last_start = max(s for s, _ in spans)
    while_submitting: list[float] = []
    after: list[float] = []
    for held in runs.values():
        held.sort()
        for (_, end), (start, _) in itertools.pairwise(held):
            if end < last_start:  # a job was still waiting when this GPU came free
                (while_submitting if end < submitted else after).append((start - end) * 1000)
    handovers = while_submitting + after
    last_end = max(e for _, e in spans)
    return {
        "jobs": jobs,
        "gpus": GPUS,
        "submit_s": round(submitted - first, 2),
        "drain_s": round(last_end - first, 2),
        "ideal_s": round(jobs / GPUS, 2),
        "jobs_per_s": round(jobs / (last_end - first), 2),
        "handovers": len(handovers),
        "handover_ms": _ms(handovers),
        "while_submitting": {"handovers": len(while_submitting), "ms": _ms(while_submitting)},
        "after_submitting": {"handovers": len(after), "ms": _ms(after)},
    }


def restart(history: int, base: Path) -> dict[str, Any]:
    """Fill a store with ``history`` finished jobs, start a server on it, time its answers."""
    state = base / "history"
    state.mkdir()
    store = Store(state / "ringleader.db")
    spec = parse_spec({"name": "old", "command": ["true"], "user": "admin"})
    filled = time.perf_counter()
    for _ in range(history):
        row = store.add(spec)
        row.state, row.finished_at = State.SUCCEEDED, row.submitted_at
        store.save(row, "succeeded")
    filled = time.perf_counter() - filled
    store.close()
    started = time.time()
    with local_server(gpus=4, state_dir=state, log=base / "history.log", round_s=30) as served:
        health_s = time.time() - started
        r = httpx.get(served.url + "/jobs", headers=served.headers, timeout=30)
        r.raise_for_status()
        listed_s = time.time() - started
        page = len(r.json())
    return {
        "finished_jobs": history,
        "fill_s": round(filled, 1),
        "health_s": round(health_s, 2),
        "restart_s": round(listed_s, 2),
        "first_page_jobs": page,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000, help="one-second jobs to drain")
    parser.add_argument("--history", type=int, default=100_000, help="finished jobs in store")
    parser.add_argument("--repeat", type=int, default=3, help="drains (each a fresh server)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-cp-") as tmp:
        base = Path(tmp)
        drains = []
        for i in range(args.repeat):
            drains.append(drain(args.jobs, base / f"run{i}"))
            print(json.dumps(drains[-1]), flush=True)
        restarted = restart(args.history, base)
        print(json.dumps(restarted), flush=True)
    report = {
        "what": __doc__.splitlines()[0],
        **stamp("python bench/control_plane.py"),
        "targets": TARGETS,
        "drains": drains,
        "restart": restarted,
        "met": {
            "drain": all(d["drain_s"] <= TARGETS["drain_s"] for d in drains),
            "handover": all(d["handover_ms"]["p99"] < TARGETS["handover_p99_ms"] for d in drains),
            "restart": restarted["restart_s"] <= TARGETS["restart_s"],
        },
    }
    args.out.parent.mkdir(exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["met"]))


if __name__ == "__main__":
    main()
