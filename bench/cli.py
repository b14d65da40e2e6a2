"""How fast the everyday CLI commands start: wall time of each against a live server.

A ``ringleader server`` with one virtual device holds one running job (a
sleeper) and a few queued ones. Each command runs ``REPEAT`` times (after one
untimed run) as a user's shell runs it: the installed ``ringleader`` entry
point in a fresh process, ``RINGLEADER_URL`` set, bytecode cached as a user's
would be. Target (issue 16): median
under 0.3 s for ``jobs``, ``show``, ``submit``, ``logs`` and ``cancel``.
Writes bench/results/cli.json, with a calibration loop so days compare.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import statistics
import tempfile
from pathlib import Path
from typing import Any

import httpx

from _common import calibration_s, commit, timed_command, wait_until
from ringleader.runtime.local_server import local_server

OUT = Path(__file__).parent / "results" / "cli.json"
REPEAT = 15
TARGET_S = 0.3
SLEEPER = {"name": "sleeper", "command": ["sleep", "600"]}


def submit(client: httpx.Client, spec: dict[str, Any]) -> str:
    r = client.post("/jobs", json=spec, timeout=10)
    r.raise_for_status()
    job_id: str = r.json()["id"]
    return job_id


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
        base = Path(tmp)
        spec_file = base / "job.yaml"
        spec_file.write_text("name: queued\ncommand: [sleep, '600']\n")
        with local_server(
            gpus=1, state_dir=base / "state", log=base / "server.log", round_s=5
        ) as served:
            api = served.client()
            running = submit(api, SLEEPER)
            wait_until(lambda: api.get(f"/jobs/{running}").json()["state"] == "running", 60)
            env = {**os.environ, **served.env, "COLUMNS": "120"}
            # As on a user's machine: the untimed first run writes the bytecode cache
            # (a sandbox that sets this would compile every changed module each run).
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            # Queued jobs to cancel, one per timed cancel (and the untimed first).
            to_cancel = [submit(api, {**SLEEPER, "name": f"c{i}"}) for i in range(REPEAT + 1)]
            commands: dict[str, list[list[str]]] = {
                "jobs": [["jobs"]] * (REPEAT + 1),
                "show": [["show", running]] * (REPEAT + 1),
                "logs": [["logs", running]] * (REPEAT + 1),
                "submit": [["submit", str(spec_file)]] * (REPEAT + 1),
                "cancel": [["cancel", job] for job in to_cancel],
                "version": [["version"]] * (REPEAT + 1),
                "--help": [["--help"]] * (REPEAT + 1),
            }
            results: dict[str, Any] = {}
            for name, runs in commands.items():
                # The first run warms the disk cache.
                times = [timed_command(args, env) for args in runs][1:]
                results[name] = {
                    "median_s": round(statistics.median(times), 3),
                    "max_s": round(max(times), 3),
                    "runs": len(times),
                }
                print(f"{name:8s} median {results[name]['median_s']:.3f} s", flush=True)
            for job in [running, *to_cancel]:
                api.delete(f"/jobs/{job}", timeout=10)
    everyday = ("jobs", "show", "submit", "logs", "cancel")
    report = {
        "what": __doc__.splitlines()[0],
        "command": "python bench/cli.py",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "commit": commit(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "calibration_s": calibration_s(),
        "target_median_s": TARGET_S,
        "commands": results,
        "met": all(results[c]["median_s"] < TARGET_S for c in everyday),
    }
    OUT.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({"met": report["met"]}))


if __name__ == "__main__":
    main()
