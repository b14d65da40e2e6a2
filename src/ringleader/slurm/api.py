"""What the Slurm executor asks of Slurm, whichever way it reaches it.

Two ways in, one protocol: Slurm's own commands (``slurm.client.Slurm``: ``sinfo``,
``sbatch``, ``squeue``, ``scancel``, ``scontrol``), for a server inside the
cluster's MUNGE perimeter; and ``slurmrestd`` with a JWT (``slurm.rest.SlurmRest``)
for one outside it. The executor speaks only ``SlurmApi``; a batch job is a
``BatchJob``, which each way writes down in its own form.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ringleader.runtime.workers.executor.base import ExecutorUnavailable

USABLE = ("idle", "mix", "alloc", "comp", "plnd")
"""Node states (``sinfo``'s short names) a node the executor may place on has (a
drained, down, failed or unknown node leaves ringleader's view). ``plnd``: held by
backfill for a job waiting to start there, which is one of ours."""
UNKNOWN = "unk"
"""The state of a node slurmctld has not heard from since it started (for some
seconds after a restart of slurmctld): no news, not bad news."""


_GRES_GPU = re.compile(r"gpu(?::([A-Za-z0-9_.-]+))?:(\d+)")


def gres_gpus(gres: str) -> tuple[int, str]:
    """A node's GPUs and their type from its GRES (``gpu:2``, ``gpu:a100:4(S:0-1)``)."""
    count, gpu_type = 0, ""
    for match in _GRES_GPU.finditer(gres):
        count += int(match.group(2))
        gpu_type = gpu_type or (match.group(1) or "")
    return count, gpu_type


class SlurmUnavailable(RuntimeError):
    """Slurm did not answer, or refused; the message says which call and why."""


class SlurmUnreachable(SlurmUnavailable, ExecutorUnavailable):
    """slurmctld (or slurmrestd) did not answer at all: says nothing of any job."""


@dataclass(frozen=True, slots=True)
class SlurmNode:
    name: str
    gpus: int
    gpu_type: str
    state: str
    """``sinfo``'s short name of the node's base state (``idle``, ``mix``, ``drain``...)."""
    responding: bool = True
    """False once slurmctld has had no answer for ``SlurmdTimeout``: Slurm marks
    it DOWN and ends its jobs only some seconds later."""

    @property
    def usable(self) -> bool:
        return self.responding and self.state in USABLE


@dataclass(frozen=True, slots=True)
class BatchJob:
    """One generation of a gang as a Slurm batch job: pinned to ``nodes``, ``tasks``
    tasks in all, and on each node ``gpus_per_node`` GPUs as GRES (0: none, on a
    partition where ringleader hands out the GPUs itself)."""

    name: str
    nodes: tuple[str, ...]
    tasks: int
    gpus_per_node: int
    output: Path
    workdir: Path
    uid: int | None = None
    """Whose job it is (None: the server's own user)."""
    oversubscribe: bool = False


STOP_SIGNAL = "WINCH"
"""What a stop through slurmrestd sends the batch shell (``batch_script`` traps it):
its ``srun`` ignores it, where a SIGTERM would make ``srun`` end every rank at once."""


def batch_script(hostfile: Path, tasks: int, run_dir: Path, python: str) -> str:
    """The batch job of a gang's generation: one ``srun`` task per rank, each where the
    hostfile puts it (``ringleader.slurm.rank``). On ``STOP_SIGNAL`` it runs
    ``scancel -s TERM`` of its own job, on its node, inside the cluster: the ranks'
    steps then get the SIGTERM ``Slurm.stop`` gives them, and the shell goes on
    waiting for ``srun``."""
    return (
        "#!/bin/sh\n"
        f"export SLURM_HOSTFILE={hostfile}\n"
        f"trap 'scancel -s TERM \"$SLURM_JOB_ID\"' {STOP_SIGNAL}\n"
        f"srun --distribution=arbitrary --ntasks={tasks} --kill-on-bad-exit=0 "
        f"{python} -m ringleader.slurm.rank {run_dir} &\n"
        "ranks=$!\n"
        'while :; do wait "$ranks"; code=$?; kill -0 "$ranks" 2>/dev/null || exit "$code"; done\n'
    )


class SlurmApi(Protocol):
    """The calls the executor makes. Each raises ``SlurmUnreachable`` when Slurm does
    not answer, and ``SlurmUnavailable`` when it refuses."""

    can_suspend: bool
    """Whether ``suspend`` and ``resume`` exist this way (slurmrestd 22.05 has neither)."""

    def nodes(self) -> list[SlurmNode]:
        """Every node of the partition, its GPUs (GRES ``gpu``) and state."""
        ...

    def oversubscribes(self) -> bool:
        """Whether the partition lets jobs share a node (``OverSubscribe=FORCE``/``YES``)."""
        ...

    def submit(self, script: str, job: BatchJob) -> str:
        """Submit ``script`` as ``job``; the Slurm job id."""
        ...

    def states(self, job_ids: Sequence[str]) -> dict[str, str]:
        """The state of each job Slurm still lists (``RUNNING``, ``PENDING``...); a job it
        has forgotten (past ``MinJobAge``) is left out."""
        ...

    def stop(self, job_id: str) -> None:
        """Ask every rank to stop: each task's launch wrapper hands its worker a
        SIGTERM. A job that has ended, or that Slurm forgot, is no error."""
        ...

    def kill(self, job_id: str) -> None:
        """SIGKILL to every process of the job, then end it; no error if it has ended."""
        ...

    def suspend(self, job_id: str) -> None:
        """``scontrol suspend``: the job's tasks stop; it keeps its nodes."""
        ...

    def resume(self, job_id: str) -> None:
        """``scontrol resume``; a job that is not suspended is left as it is."""
        ...
