"""Slurm's own commands, as an external scheduler calls them: sinfo, sbatch, squeue, scancel.

Found as Slurm's clients find Slurm: the commands on ``PATH`` and ``SLURM_CONF``.
``prefix`` runs each one somewhere else first (the lab's controller host, entered
with ``nsenter``); on a real cluster it is empty. Every call has a timeout: a
controller that does not answer is ``SlurmUnavailable``, never a hang.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ringleader.slurm.api import (
    BatchJob,
    SlurmNode,
    SlurmUnavailable,
    SlurmUnreachable,
    gres_gpus,
)

TIMEOUT_S = 20.0

UNREACHABLE = "Unable to contact slurm controller"
"""What Slurm's commands say when slurmctld does not answer (after ``MessageTimeout``)."""
FORGOTTEN = "Invalid job id"
"""What Slurm's commands say of a job past ``MinJobAge``: ended and forgotten."""
ENDED = (FORGOTTEN, "already completing or completed")
"""What ``scancel`` says of a job that has ended (or that Slurm has forgotten)."""
NOT_SUSPENDED = ("not suspended", "Unexpected message received", *ENDED)
"""What ``scontrol resume`` says of a job that runs, has ended, or is forgotten."""
NOT_RESPONDING = "*"
"""``sinfo``'s mark on a node whose slurmd has stopped answering slurmctld."""


@dataclass(frozen=True, slots=True)
class Slurm:
    """How to reach one Slurm cluster through its commands (a ``SlurmApi``)."""

    can_suspend = True
    prefix: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    partition: str | None = None

    def call(self, args: Sequence[str], *, stdin: str | None = None) -> str:
        """Run a Slurm client command; its standard output, or ``SlurmUnavailable``."""
        try:
            done = subprocess.run(
                [*self.prefix, *args],
                input=stdin,
                capture_output=True,
                text=True,
                timeout=TIMEOUT_S,
                env=None if self.env is None else dict(self.env),
            )
        except FileNotFoundError:
            raise SlurmUnavailable(
                f"{args[0]} is not on PATH: install Slurm's client commands (Debian: "
                "slurm-client) and set SLURM_CONF to the cluster's slurm.conf"
            ) from None
        except subprocess.TimeoutExpired:
            raise SlurmUnreachable(f"{args[0]} got no answer in {TIMEOUT_S:g} s") from None
        if done.returncode != 0:
            said = f"{' '.join(args[:2])} failed: {done.stderr.strip()}"
            raise (SlurmUnreachable if UNREACHABLE in done.stderr else SlurmUnavailable)(said)
        return done.stdout

    def nodes(self) -> list[SlurmNode]:
        """Every node of the partition, its GPUs (GRES ``gpu``) and state."""
        where = ["-p", self.partition] if self.partition else []
        out = self.call(["sinfo", "-h", "-N", *where, "-o", "%N|%G|%t"])
        found: dict[str, SlurmNode] = {}
        for line in out.splitlines():
            name, _, rest = line.strip().partition("|")
            gres, _, state = rest.partition("|")
            if not name:
                continue
            gpus, gpu_type = gres_gpus(gres)
            state = state.strip()
            bare = state.rstrip("*~#!%$@^-")
            responding = NOT_RESPONDING not in state[len(bare) :]
            found[name] = SlurmNode(name, gpus, gpu_type, bare, responding)
        return list(found.values())

    def oversubscribes(self) -> bool:
        """Whether the partition lets jobs share a node's resources (``OverSubscribe=``
        ``FORCE`` or ``YES``): the admin's sign that ringleader may time-slice there."""
        where = ["-p", self.partition] if self.partition else []
        out = self.call(["sinfo", "-h", *where, "-o", "%P|%h"])
        settings = [line.partition("|")[2].strip() for line in out.splitlines() if "|" in line]
        return bool(settings) and all(s.startswith(("FORCE", "YES")) for s in settings)

    def suspend(self, job_id: str) -> None:
        """``scontrol suspend``: SIGSTOP to every task; the job keeps its nodes. One that
        has ended is left to ``status`` to tell."""
        self._call_unless(["scontrol", "suspend", job_id], ENDED)

    def resume(self, job_id: str) -> None:
        """``scontrol resume``; a job that is not suspended (any more) is left as it is."""
        self._call_unless(["scontrol", "resume", job_id], NOT_SUSPENDED)

    def _call_unless(self, args: Sequence[str], harmless: Sequence[str]) -> None:
        """``call``, where a refusal that says one of ``harmless`` is no error."""
        try:
            self.call(args)
        except SlurmUnavailable as err:
            if not any(said in str(err) for said in harmless):
                raise

    def submit(self, script: str, job: BatchJob) -> str:
        """``sbatch --parsable`` of ``script`` (on stdin); the Slurm job id."""
        where = ["-p", self.partition] if self.partition else []
        out = self.call(["sbatch", "--parsable", *where, *sbatch_args(job)], stdin=script)
        return out.strip().split(";")[0]

    def states(self, job_ids: Sequence[str]) -> dict[str, str]:
        """The state of each job Slurm still lists (``RUNNING``, ``PENDING``...)."""
        if not job_ids:
            return {}
        try:
            out = self.call(["squeue", "-h", "-j", ",".join(job_ids), "-o", "%i|%T"])
        except SlurmUnavailable as err:
            if FORGOTTEN not in str(err):
                raise
            return {}  # past MinJobAge: Slurm forgot it
        states = {}
        for line in out.splitlines():
            job, _, state = line.strip().partition("|")
            if job:
                states[job] = state
        return states

    def stop(self, job_id: str) -> None:
        """``scancel -s TERM``: every task of the job's steps (not its batch shell, whose
        ``srun`` would end the step at once) gets SIGTERM."""
        self._call_unless(["scancel", "-s", "TERM", job_id], ENDED)

    def kill(self, job_id: str) -> None:
        """SIGKILL to every process of the job (its batch shell and steps), then end
        it: a plain ``scancel`` would give its tasks ``KillWait`` (30 s by default)
        after a SIGTERM, which ranks stuck on a dead peer never answer."""
        for args in (["--full", "-s", "KILL"], []):
            self._call_unless(["scancel", *args, job_id], ENDED)


def sbatch_args(job: BatchJob) -> list[str]:
    """``job`` as ``sbatch`` options."""
    resources = [f"--gres=gpu:{job.gpus_per_node}"] if job.gpus_per_node else []
    return [
        f"--job-name={job.name}",
        f"--nodelist={','.join(job.nodes)}",
        f"--nodes={len(job.nodes)}",
        f"--ntasks={job.tasks}",
        *resources,
        *(["--oversubscribe"] if job.oversubscribe else []),
        f"--output={job.output}",
        f"--chdir={job.workdir}",
        # A node that fails ends the job (NODE_FAIL), which the executor reports as
        # lost at once; requeued, it would look like a job still waiting to start.
        "--no-requeue",
        *([f"--uid={job.uid}"] if job.uid is not None else []),
    ]
