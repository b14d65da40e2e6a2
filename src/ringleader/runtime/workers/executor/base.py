"""The executor interface the controller relies on, and nothing local about it."""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ringleader.job.records import rank_of, read_exit_code
from ringleader.policy.model.views import ClusterView, Device


class ExecutorUnavailable(RuntimeError):
    """What runs the cluster did not answer (Slurm's controller): the message says which
    command and why. Nothing is known of the jobs meanwhile, so the controller holds
    every one as it is until it answers (``control.reach``)."""


@dataclass(frozen=True, slots=True)
class GangStatus:
    """What a job's workers of one generation are doing."""

    world: int
    alive: int
    exits: Mapping[int, int] = field(default_factory=dict)
    """Exit code per rank that has exited (negative: killed by that signal)."""
    starting: int = 0
    """Ranks launched that have not yet said they started."""
    lost: int = 0
    """Ranks whose machine went away (a lost node): not the job's fault."""

    @property
    def finished(self) -> bool:
        return self.alive == 0 and self.starting == 0

    @property
    def failed(self) -> bool:
        return any(code != 0 for code in self.exits.values()) or (
            self.finished and len(self.exits) < self.world
        )


class Executor(Protocol):
    name: str
    adopted_start_s: float | None
    """The longest a rank launched by an earlier controller, which then crashed, can
    take here to say it started. Past it, the launch died with that controller (it
    saves a launch before the processes exist), and the gang is launched again.
    None: as long as any launch (``launch_timeout_s``), where a rank may wait to be
    placed (Ray, Slurm)."""

    def cluster(self) -> ClusterView: ...

    def launch(
        self,
        job_id: str,
        job_dir: Path,
        generation: int,
        command: Sequence[str],
        devices: Sequence[Device],
        env: Mapping[str, str],
        *,
        max_restarts: int = 0,
        workdir: str | None = None,
        uid: int | None = None,
    ) -> None: ...

    def status(self, job_dir: Path, generation: int, world: int) -> GangStatus: ...

    def on_exit(self, wake: Callable[[], None]) -> None:
        """Call ``wake`` (from any thread) soon after a worker ``status`` saw alive ends.

        An executor that cannot tell does nothing: the controller then sees
        exits at its next regular look (``tick_s``).
        """
        ...

    def terminate(
        self, job_dir: Path, generation: int, skip: frozenset[int] = frozenset()
    ) -> set[int]:
        """Send SIGTERM to each rank's worker (not in ``skip``); the ranks now accounted for.

        A rank that has not started yet is left out of the answer, so the
        caller can try it again; one that has exited counts as signalled.
        """
        ...

    def kill(self, job_dir: Path, generation: int) -> None:
        """SIGKILL every process of the gang (each rank's whole process group)."""
        ...

    def freeze(self, job_dir: Path, generation: int) -> None:
        """Tell what runs the gang that it is suspended, once its ranks have said they
        are (the job library's own suspend gave its GPUs back): Slurm's ``scontrol
        suspend``. Nothing to do where the executor keeps no such state."""
        ...

    def thaw(self, job_dir: Path, generation: int) -> None:
        """Undo ``freeze`` before the gang is resumed or stopped (a frozen rank reads no
        control file and takes no signal); a gang not frozen is left as it is."""
        ...

    def cpu_s(self, job_dir: Path, generation: int) -> Mapping[int, float]:
        """CPU seconds each live rank's processes have used so far, where known.

        How a rank that lingers after its work is done (``control.lingering``)
        tells a hang from a last evaluation; a rank left out is not known,
        and is taken to be idle.
        """
        ...


@dataclass(frozen=True, slots=True)
class RankPlace:
    """Where one rank of a gang sits, in torchrun's terms (one agent per node)."""

    local_rank: int
    """The rank's index among the gang's ranks on its node."""
    local_world: int
    """Ranks of the gang on that node."""
    group_rank: int
    """The node's index among the gang's nodes, in order of their first rank."""
    group_world: int
    """Nodes the gang spans."""


def gang_places(devices: Sequence[Device]) -> list[RankPlace]:
    """Each rank's place (rank ``i`` runs on ``devices[i]``), for every executor alike."""
    nodes: dict[str, list[int]] = {}
    for rank, device in enumerate(devices):
        nodes.setdefault(device.node, []).append(rank)
    group = {node: i for i, node in enumerate(nodes)}
    places = []
    for rank, device in enumerate(devices):
        on_node = nodes[device.node]
        places.append(RankPlace(on_node.index(rank), len(on_node), group[device.node], len(nodes)))
    return places


def rendezvous_port(job_id: str, generation: int) -> int:
    """Rank 0's port for a gang on other hosts, from the job and generation: nothing
    there to ask for a free one before the ranks start; a clash fails the gang, which
    is retried at the next generation's port."""
    return 20_000 + zlib.crc32(f"{job_id}/{generation}".encode()) % 30_000


def exit_codes(run: Path) -> dict[int, int]:
    """Each rank's exit status, as its launch wrapper wrote it in the run directory."""
    exits: dict[int, int] = {}
    for path in run.glob("rank*.exit"):
        rank, code = rank_of(path, ".exit"), read_exit_code(path)
        if rank is not None and code is not None:
            exits[rank] = code
    return exits


def ranks_started(run: Path) -> set[int]:
    """The ranks whose launch wrapper has written its pid in the run directory."""
    return {r for path in run.glob("rank*.pid") if (r := rank_of(path, ".pid")) is not None}
