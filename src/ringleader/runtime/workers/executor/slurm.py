"""Run gangs on a Slurm cluster: ringleader decides, Slurm runs each generation as a job.

For clusters that already run Slurm: ringleader is its external scheduler
(``docs/slurm.md``), and Slurm only supplies the nodes and starts the tasks.

* ``cluster()`` reads the partition's nodes and GPUs (GRES ``gpu``) from
  ``sinfo`` at every call; a drained, down or failed node leaves the view.
* A gang's generation is one batch job pinned to the Plan's nodes (``-w``),
  one task per rank in the Plan's order (``--distribution=arbitrary``); each
  task becomes its rank through ``ringleader.slurm.rank``, which starts the
  same launch wrapper the local executor does. So the job library, control
  files, progress and checkpoints work unchanged, and the wrapper's pid and
  exit files say how each rank ended.
* ``status`` reads those exit files and asks Slurm whether the job still
  runs; ranks of a job Slurm ended without an exit file (its node died) are
  lost, which the controller treats as preemption, not as the job's failure.
* ``terminate`` is ``scancel -s TERM`` (every task's wrapper forwards it to
  its worker, as locally); ``kill`` is ``scancel``.

The job directory (``--state-dir``) must be storage every node can read and
write, as for Ray.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ringleader.policy.model.views import ClusterView, Device, Node
from ringleader.runtime.workers.executor.base import (
    GangStatus,
    exit_codes,
    gang_places,
    ranks_started,
    rendezvous_port,
)
from ringleader.runtime.workers.executor.local import WorkerLaunch, worker_env, wrapper_argv
from ringleader.runtime.workers.identity import prepare_job_dir
from ringleader.runtime.workers.wrapper import run_dir
from ringleader.slurm.api import (
    UNKNOWN,
    BatchJob,
    SlurmApi,
    SlurmNode,
    SlurmUnavailable,
    batch_script,
)
from ringleader.slurm.client import Slurm
from ringleader.slurm.rank import launch_file

JOB_ID_FILE = "slurm.jobid"
HOSTS_FILE = "slurm.hosts"
NODES_FRESH_S = 1.0
"""How old a node list a gang's status may read: one ``sinfo`` a second, not one a
gang and tick."""
GONE = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL")


class SlurmExecutor:
    name = "slurm"
    adopted_start_s: float | None = None  # a rank may wait to be placed

    def __init__(self, slurm: SlurmApi | None = None, *, shares: bool = False) -> None:
        self.slurm: SlurmApi = slurm or Slurm()
        self.shares = shares
        """The partition oversubscribes (``Slurm.oversubscribes``): gangs are submitted
        without GRES, ringleader gives each rank its GPU, and a turn's end is a
        ``scontrol suspend`` (``freeze``), so time-slicing runs here."""
        self.cuda = False
        """What the server reports; each rank finds out on its node (``slurm.rank``)."""
        self._jobs: dict[tuple[Path, int], tuple[str, frozenset[str]]] = {}
        """Each generation's Slurm job id and nodes, as launched or read back once."""
        self._seen: tuple[float, list[SlurmNode]] = (-NODES_FRESH_S, [])
        """The last ``sinfo``, and when: gangs' looks within ``NODES_FRESH_S`` share it."""
        self._usable: frozenset[str] = frozenset()
        """The nodes the last ``cluster`` found usable."""

    def _nodes(self, fresh: bool = False) -> list[SlurmNode]:
        at, nodes = self._seen
        now = time.monotonic()
        if fresh or now - at >= NODES_FRESH_S:
            nodes = self.slurm.nodes()
            self._seen = (now, nodes)
        return nodes

    def cluster(self) -> ClusterView:
        """The usable nodes with GPUs. One whose state is unknown (slurmctld has just
        restarted and not heard from it yet) stays if it was usable last time: a
        restart of slurmctld must not take every node, and every job, away."""
        seen = self._nodes(fresh=True)
        kept = {
            n.name
            for n in seen
            if n.gpus and (n.usable or (n.state == UNKNOWN and n.name in self._usable))
        }
        self._usable = frozenset(kept)
        nodes = [Node(n.name, n.gpus, gpu_type=n.gpu_type) for n in seen if n.name in kept]
        return ClusterView(tuple(nodes))

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
    ) -> None:
        job_dir = job_dir.absolute()
        prepare_job_dir(job_dir, uid)
        here = run_dir(job_dir, generation)
        here.mkdir(parents=True, exist_ok=True)
        places = gang_places(devices)
        port = rendezvous_port(job_id, generation)
        for rank, device in enumerate(devices):
            w = WorkerLaunch(
                job_id=job_id,
                job_dir=job_dir,
                generation=generation,
                rank=rank,
                world=len(devices),
                master_addr=devices[0].node,
                master_port=port,
                cuda=self.cuda,
                cuda_visible="",
                where=f"{device.node}:{device.index}",
                place=places[rank],
                max_restarts=max_restarts,
                workdir=workdir,
                uid=uid,
            )
            spec: dict[str, object] = {"argv": wrapper_argv(w, command), "env": worker_env(w, env)}
            if self.shares:
                spec["gpu"] = device.index  # no GRES, so Slurm binds none: ours
            path = launch_file(here, rank)
            path.write_text(json.dumps(spec))
            path.chmod(0o600)
        per_node: dict[str, int] = {}
        for device in devices:
            per_node[device.node] = per_node.get(device.node, 0) + 1
        hostfile = here / HOSTS_FILE
        hostfile.write_text("".join(f"{d.node}\n" for d in devices))
        script = batch_script(hostfile, len(devices), here, sys.executable)
        job = BatchJob(
            name=f"rl-{job_id}-g{generation}",
            nodes=tuple(per_node),
            tasks=len(devices),
            # On a partition ringleader time-slices, its GPUs are ringleader's to give
            # (a suspended job's GRES would stay held): no GRES, a share of the nodes.
            gpus_per_node=0 if self.shares else max(per_node.values()),
            oversubscribe=self.shares,
            output=here / "slurm.out",
            workdir=job_dir,
            uid=uid,
        )
        slurm_id = self.slurm.submit(script, job)
        (here / JOB_ID_FILE).write_text(slurm_id + "\n")
        self._jobs[(job_dir, generation)] = (slurm_id, frozenset(per_node))

    def _submitted(self, job_dir: Path, generation: int) -> tuple[str, frozenset[str]] | None:
        """The generation's Slurm job id and nodes; read from its run dir once, after a
        restart of the server."""
        key = (job_dir.absolute(), generation)
        if key not in self._jobs:
            here = run_dir(*key)
            try:
                slurm_id = (here / JOB_ID_FILE).read_text().strip()
            except OSError:
                return None
            try:
                nodes = frozenset((here / HOSTS_FILE).read_text().split())
            except OSError:
                nodes = frozenset()
            self._jobs[key] = (slurm_id, nodes)
        return self._jobs[key]

    def _slurm_id(self, job_dir: Path, generation: int) -> str | None:
        submitted = self._submitted(job_dir, generation)
        return None if submitted is None else submitted[0]

    def status(self, job_dir: Path, generation: int, world: int) -> GangStatus:
        here = run_dir(job_dir, generation)
        exits = exit_codes(here)
        submitted = self._submitted(job_dir, generation)
        if submitted is None:
            return GangStatus(world, 0, exits, starting=world - len(exits))
        slurm_id, placed = submitted
        if len(exits) >= world:
            return GangStatus(world, 0, exits)  # every rank has ended: Slurm has no more to say
        # Not listed: past MinJobAge, Slurm forgot it.
        state = self.slurm.states([slurm_id]).get(slurm_id, "COMPLETED")
        left = world - len(exits)
        started = len(ranks_started(here))
        if state in ("PENDING", "CONFIGURING", "REQUEUED") and started:
            # Ranks ran, and Slurm queued the job again (its node failed, and the
            # cluster requeues regardless): those ranks are gone with their node.
            return GangStatus(world, 0, exits, lost=left)
        if state == "PENDING" or state == "CONFIGURING":
            return GangStatus(world, 0, exits, starting=left)
        if state in GONE or state not in ("RUNNING", "COMPLETING", "SUSPENDED"):
            return GangStatus(world, 0, exits, lost=left)
        if left and self._on_silent_node(placed):
            # Its node stopped answering: Slurm ends the job once it marks the node
            # DOWN, some seconds on; its ranks there are gone (or cut off) already.
            return GangStatus(world, 0, exits, lost=left)
        return GangStatus(world, started - len(exits), exits, starting=world - started)

    def _on_silent_node(self, placed: frozenset[str]) -> bool:
        try:
            nodes = self._nodes()
        except SlurmUnavailable:
            return False  # slurmctld itself is away: no word on the nodes
        return any(n.name in placed and not n.responding for n in nodes)

    def on_exit(self, wake: Callable[[], None]) -> None:
        """Slurm tells nobody: the controller sees exits at its next look."""

    def terminate(
        self, job_dir: Path, generation: int, skip: frozenset[int] = frozenset()
    ) -> set[int]:
        slurm_id = self._slurm_id(job_dir, generation)
        if slurm_id is None:
            return set()
        started = ranks_started(run_dir(job_dir, generation))
        # scancel signals every task: one in ``skip`` that still runs gets it again,
        # which its wrapper hands on as a second SIGTERM.
        self.slurm.stop(slurm_id)
        return started - skip

    def kill(self, job_dir: Path, generation: int) -> None:
        slurm_id = self._slurm_id(job_dir, generation)
        if slurm_id is not None:
            self.slurm.kill(slurm_id)

    def freeze(self, job_dir: Path, generation: int) -> None:
        """``scontrol suspend`` of a gang whose ranks have suspended themselves (given
        their GPUs back): Slurm then counts it as suspended and stops its clock."""
        slurm_id = self._slurm_id(job_dir, generation)
        if slurm_id is not None:
            self.slurm.suspend(slurm_id)

    def thaw(self, job_dir: Path, generation: int) -> None:
        """``scontrol resume`` (a gang Slurm does not hold suspended is left as it is)."""
        slurm_id = self._slurm_id(job_dir, generation)
        if slurm_id is not None:
            self.slurm.resume(slurm_id)

    def cpu_s(self, job_dir: Path, generation: int) -> dict[int, float]:
        return {}  # not known from here: a lingering rank is taken to be idle
