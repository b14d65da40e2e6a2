"""Time-slicing on the Slurm lab: two jobs take turns on one node's GPUs, through Slurm.

On a partition that oversubscribes (the lab's ``share``), the server gives
each rank its GPU itself and ends a turn in two moves: the job library's
suspend (its GPUs given back), then ``scontrol suspend`` once the ranks said
so (``FREEZE_AFTER_S`` into the pause); a turn begins with ``scontrol
resume``, then the library's resume. ``take_turns`` runs two such jobs on a
one-node lab, watches ``squeue`` meanwhile, and measures each suspend and
resume from the server's request to the moment it had taken.
``tests/test_slurm_turns.py`` runs it. ``resumes_within_a_suspend`` asks a
resume while slurmstepd still suspends the job (it then holds the resume
back). ``pack`` runs two 1-GPU jobs under
``gandiva`` on a one-GPU lab: once each has run alone, the policy tries them
packed, two Slurm jobs running at once on the node's one GPU.
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from ringleader.job.control import PROGRESS, Action, Control, write_control
from ringleader.job.records import read_progress
from ringleader.runtime.workers.executor.slurm import JOB_ID_FILE
from ringleader.slurm.drill import ENDED_STATES, Served, job_state, records, wait
from ringleader.slurm.lab import SlurmLab

# slurmstepd's suspend: SIGTSTP, two seconds, SIGSTOP, all under the job's suspend
# lock. A second suspend inside it queues behind it, and its resume behind that:
# measured, 5 of 40 such chained resumes took 0.8-2.0 s, none of 40 spaced.
STEPD_SUSPEND_S = 2.0

_RPC = re.compile(r"^\[(\S+)\] _slurm_rpc_suspend\((suspend|resume)\) for (\d+)")


def slurm_suspends(log: Path) -> list[tuple[float, str, str]]:
    """(when, ``suspend`` or ``resume``, Slurm job id) for each of slurmctld's suspend
    calls, from its log (local time, to the millisecond)."""
    found = []
    with open(log, errors="replace") as text:
        for line in text:
            match = _RPC.match(line)
            if match:
                at = datetime.strptime(match.group(1), "%Y-%m-%dT%H:%M:%S.%f").timestamp()
                found.append((at, match.group(2), match.group(3)))
    return found


def latencies(here: Served, job: str) -> dict[str, list[float]]:
    """Seconds from each of ``job``'s suspend and resume requests to the moment it took:
    ``suspend_s`` to the job library's ``suspended`` (its GPUs free for the next job),
    ``slurm_suspend_s`` to slurmctld's suspend of it (``slurm_suspends``), ``resume_s``
    to the library's ``resumed`` (``scontrol resume`` comes first)."""
    events = here.get(f"/jobs/{job}")["events"]
    runs = (here.state / "jobs" / job / "run").glob(f"gen*/{JOB_ID_FILE}")
    ours = {path.read_text().strip() for path in runs}
    log = here.lab.root / "log" / "slurmctld.log"
    said = [r for r in records(here.state, job) if "t" in r]
    took_at = {
        "suspend_s": [r["t"] for r in said if r.get("event") == "suspended"],
        "slurm_suspend_s": [
            t for t, what, sid in slurm_suspends(log) if what == "suspend" and sid in ours
        ],
        "resume_s": [r["t"] for r in said if r.get("event") == "resumed"],
    }
    asked = {
        "suspend_s": "suspend_requested",
        "slurm_suspend_s": "suspend_requested",
        "resume_s": "resume_requested",
    }
    out: dict[str, list[float]] = {key: [] for key in took_at}
    for key, kind in asked.items():
        times = [e["t"] for e in events if e["kind"] == kind]
        for i, t in enumerate(times):
            until = times[i + 1] if i + 1 < len(times) else float("inf")
            took = next((at for at in took_at[key] if t <= at < until), None)
            if took is not None:  # a turn handed back at once is never frozen
                out[key].append(round(took - t, 3))
    return out


def two_jobs(
    here: Served, command: Sequence[str], workdir: Path, prefix: str, gpus: int
) -> tuple[list[str], list[list[str]], float]:
    """Submit ``command`` twice (``PREFIX-a``, ``PREFIX-b``, ``gpus`` each) and wait for
    both to end: their ids, what ``squeue`` listed at each look meanwhile, and the
    seconds from the submissions to the end."""
    jobs = []
    for name in (f"{prefix}-a", f"{prefix}-b"):
        out = here.cli(
            *("run", "--gpus", str(gpus), "--name", name, "--workdir", str(workdir)),
            *("--", *command),
        )
        if out.returncode:
            raise RuntimeError(f"submit failed: {out.stderr}")
        jobs.append(out.stdout.split()[-1])
    looks: list[list[str]] = []

    def ended() -> bool:
        looks.append(here.lab.run(["squeue", "-h", "-o", "%T"], timeout=30).stdout.split())
        return all(job_state(here, j) in ENDED_STATES for j in jobs)

    started = time.time()
    wait("end of both jobs", ended, 300)
    return jobs, looks, round(time.time() - started, 1)


def take_turns(here: Served, command: Sequence[str], workdir: Path) -> dict[str, Any]:
    """Two 2-GPU jobs on a lab of one 2-GPU node, and the Slurm states seen meanwhile."""
    jobs, looks, wall_s = two_jobs(here, command, workdir, "turn", 2)
    return {
        "jobs": jobs,
        "states": {j: job_state(here, j) for j in jobs},
        "slurm_states_seen": sorted({state for look in looks for state in look}),
        "wall_s": wall_s,
        **{j: latencies(here, j) for j in jobs},
    }


def packed_s(here: Served, jobs: Sequence[str]) -> float:
    """Seconds in which two jobs were both taking minibatches."""
    a, b = (
        [(r["t"] - r["step_time"], r["t"]) for r in records(here.state, j) if "step_time" in r]
        for j in jobs
    )
    return float(sum(max(0.0, min(e, e2) - max(s, s2)) for s, e in a for s2, e2 in b))


def pack(here: Served, command: Sequence[str], workdir: Path) -> dict[str, Any]:
    """Two 1-GPU jobs on a lab of one 1-GPU node under a packing policy: the looks at
    ``squeue`` that found both running at once, and how long they ran packed, from
    their minibatches."""
    jobs, looks, wall_s = two_jobs(here, command, workdir, "pack", 1)
    return {
        "jobs": jobs,
        "states": {j: job_state(here, j) for j in jobs},
        "packed_s": round(packed_s(here, jobs), 1),
        "squeue_looks": {
            "both_running": sum(look.count("RUNNING") == 2 for look in looks),
            "all": len(looks),
        },
        "wall_s": wall_s,
        "events": {j: [e["kind"] for e in here.get(f"/jobs/{j}")["events"]] for j in jobs},
    }


def resumes_within_a_suspend(
    lab: SlurmLab, command: Sequence[str], job_dir: Path, *, times: int = 4, gap_s: float = 0.3
) -> list[float]:
    """Seconds from each resume to the job library's ``resumed``, each asked ``gap_s``
    after ``scontrol suspend`` of the job the library had suspended: within the
    two seconds slurmstepd takes from SIGTSTP to SIGSTOP, in which it holds a
    resume back. The next suspend waits for that SIGSTOP (``STEPD_SUSPEND_S``), as
    a server's does (a turn comes between). ``command`` (a job-library trainer
    that outlasts the drill) runs as a batch job on the ``share`` partition, its
    control file written here as the server would, then is cancelled."""
    write_control(job_dir, Control(1, Action.RUN))
    env = {"RINGLEADER_JOB_DIR": str(job_dir), "RINGLEADER_GENERATION": "1"}
    submit = ["sbatch", "--parsable", "-p", "share", "-o", str(job_dir / "slurm.log")]
    done = lab.run([*submit, f"--wrap={shlex.join(command)}"], env=env)
    if done.returncode:
        raise RuntimeError(f"sbatch failed: {done.stderr}")
    slurm_id = done.stdout.strip().split(";")[0]

    took = []
    try:
        wait("a first minibatch", lambda: any("loss" in r for r in _progress(job_dir)), 120)
        for _ in range(times):
            _tell(job_dir, Action.SUSPEND, "suspended", len(_said(job_dir, "suspended")))
            lab.run(["scontrol", "suspend", slurm_id])
            frozen = time.time()  # slurmstepd's two seconds start after this returns
            time.sleep(gap_s)
            before = len(_said(job_dir, "resumed"))  # read first: the file grows with the run
            asked = time.time()
            lab.run(["scontrol", "resume", slurm_id])
            took.append(round(_tell(job_dir, Action.RUN, "resumed", before) - asked, 3))
            time.sleep(max(0.0, frozen + STEPD_SUSPEND_S + 0.5 - time.time()))
    finally:
        lab.run(["scancel", slurm_id])
    return took


def _said(job_dir: Path, event: str) -> list[dict[str, Any]]:
    """The library's ``event`` records so far."""
    return [r for r in _progress(job_dir) if r.get("event") == event]


def _tell(job_dir: Path, action: Action, event: str, before: int) -> float:
    """Write ``action`` to the control file, as the server does, wait for the library
    to say ``event`` more than the ``before`` times it had, and return when it said it."""
    write_control(job_dir, Control(1, action))
    wait(f"the library's {event!r}", lambda: len(_said(job_dir, event)) > before, 60)
    return float(_said(job_dir, event)[-1]["t"])


def _progress(job_dir: Path) -> list[dict[str, Any]]:
    """The records in ``job_dir``'s progress file."""
    return [r for r in read_progress(job_dir / PROGRESS) if r is not None]
