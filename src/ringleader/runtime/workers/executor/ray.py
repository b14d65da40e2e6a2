"""Run gangs on a Ray cluster: nodes and GPUs from Ray, one actor per worker.

For users who already run Ray (often on Kubernetes through KubeRay): the
scheduler's decisions stay ringleader's, Ray only supplies the machines.

* ``cluster()`` lists Ray's live nodes that have GPUs, afresh on every call,
  so nodes that join or leave show up at the controller's next decision.
* A gang's rank ``r`` on device ``(node, i)`` is a detached actor pinned to
  that node (``NodeAffinitySchedulingStrategy``, not soft) holding one GPU;
  it starts the same launch wrapper the local executor uses, so the job
  library, its control file, progress and checkpoints work unchanged. The
  wrapper dies with its actor: a lost node takes its workers with it.
* ``status`` reads the wrapper's exit files and asks each live actor; an
  actor Ray reports dead (its node is gone) counts as a lost rank, which the
  controller treats as preemption — the job goes back to the queue and
  restarts from its last checkpoint where the policy puts it — not as a
  failure of the job.

The job directory (``--state-dir``) must be storage every node can read and
write (NFS, a shared volume): control files, progress and checkpoints live
there. On one machine, as in the tests, any directory will do.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ringleader.job.records import read_exit_code
from ringleader.policy.model.views import ClusterView, Device, Node
from ringleader.runtime.workers.executor.base import GangStatus, gang_places, rendezvous_port
from ringleader.runtime.workers.executor.local import WorkerLaunch, spawn_worker
from ringleader.runtime.workers.gpus import type_name
from ringleader.runtime.workers.identity import prepare_job_dir
from ringleader.runtime.workers.wrapper import run_dir

NAMESPACE = "ringleader"
NODE_NAME_LEN = 12
POLL_S = 0.2


class RayUnavailable(RuntimeError):
    pass


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RayUnavailable("the Ray executor needs Ray: pip install 'ringleader[ray]'") from None
    return ray


class _Worker:
    """The actor body: starts one worker and reports on it. Runs on the worker's node."""

    def __init__(self) -> None:
        self.proc: Any = None

    def start(self, launch: WorkerLaunch, command: Sequence[str], env: Mapping[str, str]) -> int:
        ray = _ray()
        cuda = shutil.which("nvidia-smi") is not None
        gpu_ids = ray.get_runtime_context().get_accelerator_ids().get("GPU", [])
        launch = replace(
            launch, cuda=cuda, cuda_visible=",".join(map(str, gpu_ids)) if cuda else ""
        )
        self.proc = spawn_worker(launch, command, env, own_session=False)
        return int(self.proc.pid)

    def poll(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def terminate(self) -> bool:
        """SIGTERM to the launch wrapper, which forwards it to the worker; whether started."""
        if self.proc is None:
            return False
        if self.proc.poll() is None:
            self.proc.terminate()
        return True

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()


def _actor_name(job_dir: Path, generation: int, rank: int) -> str:
    return f"{job_dir.name}-g{generation}-r{rank}"


class RayExecutor:
    name = "ray"
    adopted_start_s: float | None = None  # a rank may wait to be placed

    def __init__(
        self, address: str = "auto", threads_per_worker: int = 1, gpu_share: float = 0.25
    ) -> None:
        ray = _ray()
        if not ray.is_initialized():
            _check_listening(address)
            try:
                ray.init(address=address, namespace=NAMESPACE, log_to_driver=False)
            except (ConnectionError, ValueError) as err:
                raise RayUnavailable(
                    f"cannot join a Ray cluster at {address!r} ({_first_line(err)}); start "
                    "one with `ray start --head`, or give its address with --address"
                ) from None
        self.threads = threads_per_worker
        # A worker asks Ray for a share of a GPU, not a whole one: ringleader,
        # not Ray, decides who shares a GPU (time-slicing, packing) and never
        # gives one GPU to two exclusive jobs; the share only bounds how many
        # residents one GPU can take.
        self._worker_cls = ray.remote(num_cpus=0, num_gpus=gpu_share, max_restarts=0)(_Worker)
        self._launched: dict[tuple[str, int], int] = {}

    # -- the cluster -----------------------------------------------------------
    def _nodes(self) -> list[dict[str, Any]]:
        ray = _ray()
        nodes = [n for n in ray.nodes() if n.get("Alive") and n["Resources"].get("GPU", 0) >= 1]
        return sorted(nodes, key=lambda n: str(n["NodeID"]))

    def cluster(self) -> ClusterView:
        return ClusterView(
            tuple(
                Node(
                    str(n["NodeID"])[:NODE_NAME_LEN],
                    int(n["Resources"]["GPU"]),
                    gpu_type=node_gpu_type(n["Resources"]),
                )
                for n in self._nodes()
            )
        )

    def _node(self, name: str) -> dict[str, Any]:
        for n in self._nodes():
            if str(n["NodeID"]).startswith(name):
                return n
        raise RuntimeError(f"Ray node {name} is gone")

    def _node_id(self, name: str) -> str:
        return str(self._node(name)["NodeID"])

    def _address_of(self, name: str) -> str:
        return str(self._node(name)["NodeManagerAddress"])

    # -- gangs -----------------------------------------------------------------
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
        _ray()
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        # The wrapper makes the run directory, as the job's user if it has one.
        prepare_job_dir(job_dir, uid)
        actors = []
        for rank, device in enumerate(devices):
            strategy = NodeAffinitySchedulingStrategy(self._node_id(device.node), soft=False)
            actors.append(
                self._worker_cls.options(
                    name=_actor_name(job_dir, generation, rank),
                    lifetime="detached",
                    scheduling_strategy=strategy,
                ).remote()
            )
        # Nothing here waits on Ray: an actor that cannot be placed yet must not
        # stall the controller (the API shares its event loop). Rank 0's node
        # address comes from Ray's node table and the rendezvous port from the
        # job and generation; a clash fails the gang, which is retried.
        master_addr = self._address_of(devices[0].node)
        port = rendezvous_port(job_id, generation)
        places = gang_places(devices)
        for rank, (actor, device) in enumerate(zip(actors, devices, strict=True)):
            launch = WorkerLaunch(
                job_id=job_id,
                job_dir=job_dir,
                generation=generation,
                rank=rank,
                world=len(devices),
                master_addr=master_addr,
                master_port=port,
                cuda=False,
                cuda_visible="",
                cpus=(),
                where=f"{device.node}:{device.index}",
                place=places[rank],
                max_restarts=max_restarts,
                workdir=workdir,
                uid=uid,
            )
            n = str(self.threads)
            threads = {"OMP_NUM_THREADS": n, "RINGLEADER_THREADS": n}
            actor.start.remote(launch, list(command), {**env, **threads})
        self._launched[(str(job_dir), generation)] = len(devices)

    def _actor(self, job_dir: Path, generation: int, rank: int) -> Any:
        ray = _ray()
        try:
            return ray.get_actor(_actor_name(job_dir, generation, rank), namespace=NAMESPACE)
        except ValueError:
            return None

    def on_exit(self, wake: Callable[[], None]) -> None:
        """Not told: exits on other machines are seen at the controller's next look."""

    def status(self, job_dir: Path, generation: int, world: int) -> GangStatus:
        ray = _ray()
        here = run_dir(job_dir, generation)
        exits: dict[int, int] = {}
        lost = 0
        alive = 0
        starting = 0
        for rank in range(world):
            code = read_exit_code(here / f"rank{rank}.exit")
            if code is not None:
                exits[rank] = code
                continue
            actor = self._actor(job_dir, generation, rank)
            if actor is None:
                lost += 1
                continue
            ref = actor.poll.remote()
            ready, _ = ray.wait([ref], timeout=POLL_S)
            if not ready:
                starting += 1  # not placed yet (its node is busy or starting)
                continue
            try:
                code = ray.get(ref)
            except ray.exceptions.RayActorError:
                lost += 1
                continue
            if code is None:
                alive += 1
            else:
                exits[rank] = int(code)
        if lost:
            for rank in range(world):
                exits.setdefault(rank, -9)
            alive, starting = 0, 0
        if alive == 0 and starting == 0:
            self._release(job_dir, generation, world)
        return GangStatus(world, alive, exits, starting, lost=lost)

    def _release(self, job_dir: Path, generation: int, world: int) -> None:
        """Free the GPUs the gang's actors reserve once its workers are gone."""
        ray = _ray()
        for rank in range(world):
            actor = self._actor(job_dir, generation, rank)
            if actor is not None:
                ray.kill(actor)

    def terminate(
        self, job_dir: Path, generation: int, skip: frozenset[int] = frozenset()
    ) -> set[int]:
        ray = _ray()
        sent = set()
        for rank in range(self._launched.get((str(job_dir), generation), 64)):
            actor = None if rank in skip else self._actor(job_dir, generation, rank)
            if actor is None:
                continue
            with contextlib.suppress(ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
                if ray.get(actor.terminate.remote(), timeout=POLL_S):
                    sent.add(rank)
        return sent

    def kill(self, job_dir: Path, generation: int) -> None:
        ray = _ray()
        world = self._launched.get((str(job_dir), generation), 64)
        for rank in range(world):
            actor = self._actor(job_dir, generation, rank)
            if actor is None:
                continue
            with contextlib.suppress(ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
                ray.get(actor.stop.remote(), timeout=10)
            ray.kill(actor)

    def freeze(self, job_dir: Path, generation: int) -> None:
        """Nothing to tell: the job library's suspend is the whole of it here."""

    def thaw(self, job_dir: Path, generation: int) -> None:
        """Nothing was frozen."""

    def cpu_s(self, job_dir: Path, generation: int) -> dict[int, float]:
        """Not known: a rank's processes are on another node (taken to be idle)."""
        return {}


def env_has_ray() -> bool:
    """Whether Ray can be imported here (the optional extra)."""
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return os.environ.get("RINGLEADER_NO_RAY") is None


def _first_line(err: Exception) -> str:
    lines = str(err).strip().splitlines()
    return lines[0] if lines else type(err).__name__


def _check_listening(address: str, timeout_s: float = 5.0) -> None:
    """Fail fast on a ``host:port`` where nothing listens: Ray itself retries for minutes."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "://" in address:
        return  # "auto", a ray:// client address: Ray's own lookup applies
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout_s):
            pass
    except OSError as err:
        raise RayUnavailable(
            f"nothing answers at {address} ({err.strerror or err}); check --address "
            "(the head node's GCS port, 6379 by default)"
        ) from None


def node_gpu_type(resources: dict[str, Any]) -> str:
    """A Ray node's GPU type, from the ``accelerator_type:NAME`` resource Ray sets from
    NVML (``accelerator_type:A100`` → ``a100``); "" where it names none."""
    for key in sorted(resources):
        if key.startswith("accelerator_type:") and resources[key]:
            return type_name(key.partition(":")[2])
    return ""
