"""TensorLights in the runtime: real PS jobs sharing a host, with and without ranks.

``--jobs`` parameter-server jobs (``ringleader.workloads.ps``: one PS and two
workers each, ``--steps`` synchronous steps of a 52k-parameter MLP, so 210 KB
each way per worker and step) are submitted together to a ``ringleader
server`` run in a network namespace of its own. Its loopback, where the local
executor's PS traffic flows, is shaped to ``--mbit`` (20) by the server's tc agent
(``--traffic-device lo``) in both arms:

* ``ranks``: ``--policy ringleader``, whose traffic stage ranks the PSes in its
  order (TensorLights' One): the first job's updates leave first;
* ``fifo``: ``--policy tiresias``, the same tc tree at the same rate but no
  traffic stage: every job's packets share one queue.

The jobs fit at once, so both policies place them alike and only the ranks
differ. Arms alternate, ``--repeat`` times each. JCT is each job's finish
minus the first submission. Writes ``bench/results/traffic-runtime.json``.
Needs root (namespaces and tc).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import stamp, wait_until
from ringleader.net.netns import reachable_namespace
from ringleader.net.tc import have_net_admin
from ringleader.runtime.local_server import local_server

OUT = Path(__file__).parent / "results" / "traffic-runtime.json"
ARMS = {"ranks": "ringleader", "fifo": "tiresias"}
EXAMPLES_PER_STEP = 64  # two workers × 32


def one_run(arm: str, jobs: int, steps: int, mbit: float, base: Path) -> dict[str, Any]:
    state = base / f"{arm}-{time.monotonic_ns()}"
    command = (
        "python -m ringleader.workloads.ps --epochs 1 --hidden 256 "
        f"--examples-per-epoch {steps * EXAMPLES_PER_STEP} --checkpoint-every-s 600"
    )
    with (
        reachable_namespace() as ns,
        local_server(
            gpus=3 * jobs,
            state_dir=state,
            log=base / f"{arm}.log",
            round_s=30,
            policy=ARMS[arm],
            netns=ns.name,
            host=ns.address,
            extra=["--traffic-device", "lo", "--traffic-mbit", f"{mbit:g}"],
        ) as served,
    ):
        api = served.client()
        ids = []
        first = time.time()
        for i in range(jobs):
            spec = {"name": f"ps{i}", "command": command, "arch": "ps", "gpus": 3}
            r = api.post("/jobs", json=spec)
            r.raise_for_status()
            ids.append(r.json()["id"])

        def done() -> bool:
            return all(
                api.get(f"/jobs/{j}").json()["state"] in ("succeeded", "failed") for j in ids
            )

        wait_until(done, timeout=600, poll_s=0.5)
        rows = [api.get(f"/jobs/{j}").json() for j in ids]
    bad = [r["id"] for r in rows if r["state"] != "succeeded"]
    if bad:
        raise RuntimeError(f"{arm}: jobs {bad} failed; see {state}")
    jct = [round(r["finished_at"] - first, 2) for r in rows]
    return {"jct_s": jct, "avg_jct_s": round(statistics.mean(jct), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=48)
    parser.add_argument("--mbit", type=float, default=20.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    ok, why = have_net_admin()
    if not ok:
        print(json.dumps({"skipped": why}))
        return
    command = "python bench/traffic_runtime.py" + "".join(
        f" --{k} {v:g}" if isinstance(v, float) else f" --{k} {v}" for k, v in vars(args).items()
    )
    report: dict[str, Any] = {**stamp(command), **vars(args)}
    runs: dict[str, list[dict[str, Any]]] = {arm: [] for arm in ARMS}
    with tempfile.TemporaryDirectory(prefix="rl-traffic-") as tmp:
        for rep in range(args.repeat):
            for arm in ARMS:
                run = one_run(arm, args.jobs, args.steps, args.mbit, Path(tmp))
                runs[arm].append(run)
                print(f"{rep} {arm}: {run}", file=sys.stderr, flush=True)
    for arm, done in runs.items():
        report[arm] = {
            "runs": done,
            "avg_jct_s": round(statistics.mean(r["avg_jct_s"] for r in done), 2),
            "first_jct_s": round(statistics.mean(min(r["jct_s"]) for r in done), 2),
            "last_jct_s": round(statistics.mean(max(r["jct_s"]) for r in done), 2),
        }
    report["ranks_over_fifo"] = {
        key: round(report["ranks"][key] / report["fifo"][key], 3)
        for key in ("avg_jct_s", "first_jct_s", "last_jct_s")
    }
    OUT.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["ranks_over_fifo"]))


if __name__ == "__main__":
    main()
