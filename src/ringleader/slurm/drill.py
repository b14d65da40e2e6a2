"""Failure drills on the Slurm lab: a server drives the lab, and a node dies under a job.

``served`` runs ``ringleader server --executor slurm`` on the lab's controller
host, as a site runs it where Slurm's commands reach slurmctld; ``node_failure``
submits one elastic job, cuts the power of one of its nodes once it has a
checkpoint (``SlurmLab.fail_node``), and measures what the failure cost it:
when the server noticed, when the job trained again, how many steps it
lost. ``tests/test_slurm_failures.py`` and ``bench/failures.py`` both run it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ringleader.job.control import PROGRESS
from ringleader.job.records import read_progress
from ringleader.slurm.lab import SlurmLab

PORT = 28080
"""The server's port on the controller host: that host's loopback is the lab's own,
where only slurmctld listens (6817); below the ephemeral range (32768 and up), so
none of the clients' own connections can hold it first."""
LOST = "lost with their node"
"""What the server's log says when it finds a gang's node gone."""


@dataclass(frozen=True, slots=True)
class Served:
    lab: SlurmLab
    env: dict[str, str]
    state: Path
    log: Path

    def get(self, path: str) -> Any:
        """``GET path`` from the server, as its admin, decoded (from the controller host,
        where the server listens)."""
        code = (
            "import httpx, os, sys; print(httpx.get(os.environ['RINGLEADER_URL'] + sys.argv[1],"
            " headers={'Authorization': 'Bearer ' + os.environ['RINGLEADER_TOKEN']}).text)"
        )
        done = self.lab.run([sys.executable, "-c", code, path], timeout=30, env=self.env)
        return json.loads(done.stdout)

    def cli(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """``ringleader ARGS`` on the controller host, as this server's admin."""
        argv = [sys.executable, "-m", "ringleader", *args]
        return self.lab.run(argv, timeout=timeout, env=self.env)


@contextmanager
def served(
    lab: SlurmLab,
    state: Path,
    log: Path,
    port: int = PORT,
    more: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> Iterator[Served]:
    """A server on ``lab``'s controller host (``--round-s 1``, then ``more`` flags, with
    ``env`` over the lab's environment), up and answering."""
    with open(log, "ab") as out:
        server = subprocess.Popen(
            lab.on_controller(
                [
                    *(sys.executable, "-m", "ringleader", "server", "--executor", "slurm"),
                    *("--state-dir", str(state), "--port", str(port), "--round-s", "1"),
                    "--no-isolate-jobs",
                    *more,
                ]
            ),
            env={**lab.env(), **(env or {})},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    here = Served(lab, {"RINGLEADER_URL": f"http://127.0.0.1:{port}"}, state, log)
    try:
        deadline = time.monotonic() + 60
        while not (state / "admin.token").exists() or here.cli("jobs").returncode:
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the server did not come up: see {log}")
            time.sleep(0.3)
        here.env["RINGLEADER_TOKEN"] = (state / "admin.token").read_text().strip()
        yield here
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()


def records(state: Path, job: str) -> list[dict[str, Any]]:
    """Job ``job``'s progress records (the job library's, on the shared state dir)."""
    return [r for r in read_progress(state / "jobs" / job / PROGRESS) if r is not None]


def steps(state: Path, job: str, generation: int) -> list[dict[str, Any]]:
    """The step records of one of ``job``'s generations."""
    return [r for r in records(state, job) if r.get("g") == generation and "step" in r]


def cost(state: Path, job: str, failed_at: float, done: list[dict[str, Any]]) -> dict[str, Any]:
    """What a fault at ``failed_at`` cost ``job``, whose first generation had taken the
    steps ``done`` by then: when it trained again, and the steps it lost (the first
    generation's last step minus the one the next restored). Its last, not the last
    in ``done``: a step in flight at the fault may still be recorded after it."""
    after = [r for r in records(state, job) if r.get("event") == "started" and r["g"] > 1]
    resumed = steps(state, job, after[0]["g"]) if after else []
    last = max(r["step"] for r in [*done, *steps(state, job, 1)])
    return {
        "trains_again_s": round(resumed[0]["t"] - failed_at, 2) if resumed else None,
        "step_at_failure": last,
        "restored_step": after[0]["restored_step"] if after else None,
        "steps_lost": last - (after[0]["restored_step"] or 0) if after else None,
        "step_s": round((done[-1]["t"] - done[0]["t"]) / max(len(done) - 1, 1), 3),
    }


def noticed(log: Path, failed_at: float, said: str) -> float | None:
    """Seconds from the fault to the server's first log line that has ``said``."""
    with open(log, errors="replace") as text:
        for line in text:
            if said in line:
                at = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
                return round(at - failed_at, 2)
    return None


def wait(what: str, until: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not until():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} in {timeout_s:g} s")
        time.sleep(0.5)


def save_jobs(lab: SlurmLab) -> float:
    """Touch every job Slurm holds (a comment), so slurmctld saves its job state soon;
    the time from which a save holds them."""
    since = time.time()
    for slurm_id in lab.run(["squeue", "-h", "-o", "%i"]).stdout.split():
        lab.run(["scontrol", "update", f"JobId={slurm_id}", "Comment=saved"])
    return since


def job_state(here: Served, job: str) -> str:
    lines = here.cli("show", job).stdout.splitlines()
    return next((line.split()[1] for line in lines if line.startswith("state:")), "?")


def node_failure(
    here: Served, command: Sequence[str], workdir: Path, after_checkpoint_s: float = 0.0
) -> dict[str, Any]:
    """Run ``command`` as a 4-GPU elastic job (2..4), fail one of its nodes
    ``after_checkpoint_s`` after its first checkpoint, and wait for its end. Seconds
    are from the failure. Half a checkpoint interval is what a failure at a random
    moment costs on average."""
    out = here.cli(
        *("run", "--gpus", "4", "--elastic", "2:4", "--name", "victim"),
        *("--workdir", str(workdir), "--", *command),
    )
    if out.returncode:
        raise RuntimeError(f"submit failed: {out.stderr}")
    job = out.stdout.split()[-1]
    _after_first_checkpoint(here, job, after_checkpoint_s)
    shown = here.cli("show", job).stdout
    first = shown.split("launched 4 GPU(s) on ")[1].split()[0].split(":")[0]
    here.lab.fail_node(first)
    failed_at = time.time()
    done = steps(here.state, job, 1)
    return {"failed_node": first, **_outcome(here, job, failed_at, done, LOST)}


def _after_first_checkpoint(here: Served, job: str, after_s: float) -> None:
    kept = here.state / "jobs" / job / "checkpoints"
    wait("checkpoint", lambda: kept.is_dir() and any(kept.iterdir()), 120)
    time.sleep(after_s)


def _outcome(
    here: Served, job: str, failed_at: float, done: list[dict[str, Any]], said: str
) -> dict[str, Any]:
    """Wait for ``job``'s end; what became of it, and what the fault cost it."""
    wait("end of the job", lambda: job_state(here, job) in ("succeeded", "failed"), 240)
    return {
        "job": job,
        "state": job_state(here, job),
        "history": here.cli("show", job).stdout.split("events:")[-1].strip().splitlines(),
        "noticed_s": noticed(here.log, failed_at, said),
        **cost(here.state, job, failed_at, done),
    }


HUNG = "no new step"
"""What the server's log says when a gang has taken no step for its ``stall_s``."""
FAILED = "a worker failed"
"""What the server's log says when a rank's process exits with an error."""


def rank_fault(
    here: Served,
    command: Sequence[str],
    workdir: Path,
    fault: str,
    stall_s: float,
    after_checkpoint_s: float = 0.0,
) -> dict[str, Any]:
    """Run ``command`` as a 4-GPU elastic job (2..4) with ``stall_s``; ``after_checkpoint_s``
    after its first checkpoint rank 1's training process hangs (``fault`` ``hang``:
    held stopped, alive, holding its GPU, no step) or dies (``kill``: SIGKILL); wait
    for the job's end. The lab's hosts share this machine's process table, so the
    process is found by its launch wrapper's pid."""
    spec = {
        "name": "victim",
        "command": list(command),
        "gpus": 4,
        "min_gpus": 2,
        "max_gpus": 4,
        "elastic": True,
        "stall_s": stall_s,
        "workdir": str(workdir),
    }
    (workdir / "victim.json").write_text(json.dumps(spec))  # JSON is YAML
    out = here.cli("submit", str(workdir / "victim.json"))
    if out.returncode:
        raise RuntimeError(f"submit failed: {out.stderr}")
    job = out.stdout.split()[-1]
    _after_first_checkpoint(here, job, after_checkpoint_s)
    pid = training_process(here.state, job, 1)
    failed_at, done = time.time(), steps(here.state, job, 1)
    if fault == "kill":
        os.kill(pid, signal.SIGKILL)
        return _outcome(here, job, failed_at, done, FAILED)
    threading.Thread(target=hold_stopped, args=(pid,), daemon=True).start()
    return _outcome(here, job, failed_at, done, HUNG)


def training_process(state: Path, job: str, rank: int) -> int:
    """The pid of ``rank``'s training process in ``job``'s first generation: the child
    of the launch wrapper whose pid its run dir names. Found from this machine's
    process table, which the lab's hosts and a fake Ray cluster's nodes share."""
    wrapper = next((state / "jobs" / job / "run").glob(f"gen*/rank{rank}.pid"))
    found = subprocess.run(
        ["pgrep", "-P", wrapper.read_text().split()[0]], capture_output=True, text=True
    )
    return int(found.stdout.split()[0])


def hold_stopped(pid: int, every_s: float = 0.05) -> None:
    """SIGSTOP ``pid`` until it is gone: a rank that stays hung. Once stopped, something
    on a Slurm node sends it SIGCONT when its gang is asked to stop (it then took one
    more minibatch and checkpointed on its way out, losing nothing), which a rank
    stuck in a collective would not do."""
    while True:
        try:
            os.kill(pid, signal.SIGSTOP)
        except ProcessLookupError:
            return
        time.sleep(every_s)


ENDED_STATES = ("succeeded", "failed", "cancelled")
AWAY = "the cluster does not answer"
"""What the server's log says when Slurm's controller stops answering (``control.reach``)."""


def controller_outage(
    here: Served, command: Sequence[str], workdir: Path, away_s: float
) -> dict[str, Any]:
    """Run ``command`` as a 2-GPU job, stop slurmctld for ``away_s`` once the job
    runs, submit a second job (``sleep 1``) meanwhile, start slurmctld again, and wait
    for both to end. What the server said and showed while Slurm was away, and what
    became of each job.

    slurmctld is killed once it has saved the job: a SIGKILL before that loses the
    job (a restarted slurmctld knows nothing of it), which is another drill."""
    first = here.cli(
        *("run", "--gpus", "2", "--name", "through", "--workdir", str(workdir), "--", *command)
    )
    if first.returncode:
        raise RuntimeError(f"submit failed: {first.stderr}")
    job = first.stdout.split()[-1]
    wait("running", lambda: job_state(here, job) == "running", 60)
    saved_from = save_jobs(here.lab)
    wait("Slurm to save the job", lambda: here.lab.jobs_saved_since(saved_from), 30)
    here.lab.stop_controller()
    away_at = time.time()
    wait("word of it", lambda: noticed(here.log, away_at, AWAY) is not None, away_s)
    during = here.cli("run", "--gpus", "1", "--name", "during", "--", "sleep", "1")
    later = during.stdout.split()[-1] if during.returncode == 0 else None
    cluster = here.get("/cluster")
    listing = here.cli("jobs").stdout
    held = job_state(here, job)
    time.sleep(max(away_s - (time.time() - away_at), 0))
    here.lab.start_controller()
    back_at = time.time()
    jobs = [j for j in (job, later) if j is not None]
    wait("end of the jobs", lambda: all(job_state(here, j) in ENDED_STATES for j in jobs), 240)
    return {
        "job": job,
        "during": later,
        "submitted_while_away": during.returncode == 0,
        "noticed_s": noticed(here.log, away_at, AWAY),
        "state_while_away": held,
        "listing_while_away": listing,
        "cluster_while_away": cluster,
        "back_after_s": round(back_at - away_at, 1),
        "states": {j: job_state(here, j) for j in jobs},
        "history": here.cli("show", job).stdout.split("events:")[-1].strip().splitlines(),
    }
