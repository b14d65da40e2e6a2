"""The local executor: a job's workers as processes on this machine.

Devices are the machine's GPUs when it has any (each worker sees its own
through ``CUDA_VISIBLE_DEVICES``), otherwise ``gpus`` virtual devices on the
CPU, each worker pinned to its device's share of the cores. Workers run in
their own session, so they survive a controller crash and are adopted by the
next one; their output goes to ``<job_dir>/logs/rank<r>.log``. Workers are
forked by a server that has imported torch already (``forkserver``): one
that runs a Python module or script runs in the fork, any other program is
``exec``-ed there. Before that server is ready, or if it died, they start
cold.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ringleader.job.records import rank_of, read_regular
from ringleader.perf.cores import device_cores
from ringleader.policy.model.views import ClusterView, Device
from ringleader.runtime.workers.entry import python_entry, python_path
from ringleader.runtime.workers.executor.base import GangStatus, RankPlace, exit_codes, gang_places
from ringleader.runtime.workers.executor.forkserver import Forkserver
from ringleader.runtime.workers.exits import ExitWatch
from ringleader.runtime.workers.gpus import GpuLayout, GpuSpecError, detect
from ringleader.runtime.workers.identity import home_for, prepare_job_dir
from ringleader.runtime.workers.procs import alive, kill_group, signal_process, tree_cpu_s
from ringleader.runtime.workers.warm import WarmLaunch, clean_env
from ringleader.runtime.workers.wrapper import abandon, run_dir


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class LocalExecutor:
    name = "local"
    adopted_start_s: float | None = 15.0
    """A wrapper writes its pid file within a Python start of its launch, which here is
    before the restarted controller's first look."""

    def __init__(self, gpus: int | GpuLayout | None = None, warm: bool = True) -> None:
        """``gpus``: a count or a type mix of virtual devices (``workers.gpus``); on a
        machine with GPUs, at most that many of them, typed as the driver says.
        ``warm``: fork Python workers from a server with torch imported (about
        220 MB, once); False starts every worker cold."""
        real = detect()
        self.cuda = real is not None
        if real is not None:
            if isinstance(gpus, GpuLayout) and gpus.typed:
                raise GpuSpecError(
                    f"--gpus: this machine's GPUs are {real.describe()} (read from the driver); "
                    "give a count, not types"
                )
            count = gpus.total if isinstance(gpus, GpuLayout) else gpus
            layout = real if count is None else real.limit(count)
        elif isinstance(gpus, GpuLayout):
            layout = gpus
        else:
            layout = GpuLayout.untyped(1 if gpus is None else gpus)
        if layout.total < 1:
            raise ValueError(f"need at least one device, got {layout.total}")
        self.layout = layout
        self.gpus = layout.total
        self.cores = sorted(os.sched_getaffinity(0))
        self.warm = Forkserver(warm)
        """Forks Python workers, torch already imported."""
        self.bare = Forkserver(warm, bare=True)
        """Forks workers that ``exec`` another program (``sh -c ...``, ``torchrun``)."""
        self.exits = ExitWatch()
        """Wakes the controller when a worker's wrapper ends (it has written its exit)."""
        self._all_running: dict[tuple[Path, int], tuple[tuple[int, int], ...]] = {}
        """Gangs (job dir, generation) whose every rank ran at the last look: their
        wrappers' (pid, start ticks). ``status`` needs no files for them until one ends."""

    def cluster(self) -> ClusterView:
        self.warm.start()
        self.bare.start()
        return ClusterView(self.layout.nodes())

    def close(self) -> None:
        """Stop both fork servers (the workers they started run on)."""
        self.warm.close()
        self.bare.close()

    def cpus_for(self, device: int) -> list[int]:
        """Cores for a virtual device: an even share, or one core shared round-robin."""
        return device_cores(device, self.gpus, self.cores)

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
        job_dir = job_dir.absolute()  # the command may run elsewhere (its workdir)
        prepare_job_dir(job_dir, uid)
        port = free_port()
        places = gang_places(devices)
        for rank, device in enumerate(devices):
            index = self.layout.physical(device)
            w = WorkerLaunch(
                job_id=job_id,
                job_dir=job_dir,
                generation=generation,
                rank=rank,
                world=len(devices),
                master_addr="127.0.0.1",
                master_port=port,
                cuda=self.cuda,
                cuda_visible=str(index) if self.cuda else "",
                cpus=tuple(self.cpus_for(index)),
                where=f"{device.node}:{device.index}",
                place=places[rank],
                max_restarts=max_restarts,
                workdir=workdir,
                uid=uid,
            )
            full_env = worker_env(w, env)
            entry = python_entry(command, full_env["PATH"])
            if entry is None:
                # Another program: it reads its environment itself, so any goes.
                sent = self.bare.send(_warm_launch(w, (), full_env, execs=tuple(command)))
            else:
                sent = self.warm.compatible(full_env) and self.warm.send(
                    _warm_launch(w, entry, full_env)
                )
            if not sent:
                spawn_worker(w, command, env)

    def leaders(self, job_dir: Path, generation: int) -> list[int]:
        """The pids leading each live rank's process group, rank 0 first (traffic ranks:
        every rank of a local job is on this host)."""
        found = self._pids(job_dir, generation)
        return [found[r][0] for r in sorted(found) if alive(*found[r])]

    @staticmethod
    def _pids(job_dir: Path, generation: int) -> dict[int, tuple[int, int]]:
        out: dict[int, tuple[int, int]] = {}
        for path in run_dir(job_dir, generation).glob("rank*.pid"):
            rank, raw = rank_of(path, ".pid"), read_regular(path, 0, 64)
            try:
                pid, ticks = (int(v) for v in (raw or b"").split())
            except ValueError:
                continue
            if rank is not None and 0 < pid < 2**22 and ticks >= 0:
                out[rank] = (pid, ticks)
        return out

    def status(self, job_dir: Path, generation: int, world: int) -> GangStatus:
        key = (job_dir, generation)
        known = self._all_running.get(key)
        if known is not None and all(self.exits.running(p, t) for p, t in known):
            # Every rank was running at the last look and none has ended since
            # (the exit watch would know): no need to read their files again.
            return GangStatus(world, world)
        self._all_running.pop(key, None)
        exits = exit_codes(run_dir(job_dir, generation))
        pids = self._pids(job_dir, generation)
        running = 0
        for rank, (pid, ticks) in pids.items():
            if rank not in exits and alive(pid, ticks):
                running += 1
                self.exits.watch(pid, ticks)
        if running == world and self.exits.available:
            if len(self._all_running) > 100_000:
                self._all_running.clear()  # gangs long gone: forget them
            self._all_running[key] = tuple(pids.values())
        # A rank that has written neither a pid nor an exit file is still starting.
        starting = sum(1 for r in range(world) if r not in pids and r not in exits)
        return GangStatus(world, running, exits, starting)

    def on_exit(self, wake: Callable[[], None]) -> None:
        self.exits.on_exit(wake)

    def terminate(
        self, job_dir: Path, generation: int, skip: frozenset[int] = frozenset()
    ) -> set[int]:
        # To the launch wrapper only: it forwards the signal to the worker once.
        # The group would give the worker a second SIGTERM from its wrapper.
        sent = set()
        for rank, (pid, ticks) in self._pids(job_dir, generation).items():
            if rank not in skip:
                signal_process(pid, ticks, signal.SIGTERM)
                sent.add(rank)
        return sent

    def kill(self, job_dir: Path, generation: int) -> None:
        abandon(job_dir, generation)  # first: a rank that starts after this stays out
        for pid, ticks in self._pids(job_dir, generation).values():
            kill_group(pid, ticks)

    def freeze(self, job_dir: Path, generation: int) -> None:
        """Nothing to tell: the job library's suspend is the whole of it here."""

    def thaw(self, job_dir: Path, generation: int) -> None:
        """Nothing was frozen."""

    def cpu_s(self, job_dir: Path, generation: int) -> dict[int, float]:
        used = {r: tree_cpu_s(p, t) for r, (p, t) in self._pids(job_dir, generation).items()}
        return {rank: s for rank, s in used.items() if s is not None}


@dataclass(frozen=True, slots=True)
class WorkerLaunch:
    """Everything one worker process of a gang needs to know, whatever runs it."""

    job_id: str
    job_dir: Path
    generation: int
    rank: int
    world: int
    master_addr: str
    master_port: int
    cuda: bool
    cuda_visible: str
    cpus: tuple[int, ...] = ()
    where: str = ""
    place: RankPlace | None = None
    """Where the rank sits among the gang's nodes; None: a gang on one node."""
    max_restarts: int = 0
    """Relaunches the job may still get after a failure (its spec's ``retries``)."""
    workdir: str | None = None
    """Where the command runs; None: the job directory."""
    uid: int | None = None
    """The user it runs as (``ringleader.runtime.workers.identity``); None: the server's."""


def worker_env(w: WorkerLaunch, env: Mapping[str, str]) -> dict[str, str]:
    """The worker's environment: a clean base (``clean_env``: never the server's own),
    the spec's ``env``, then torchrun's contract and ours.

    The variables a ``torchrun`` script reads are set exactly as torchrun
    sets them (one role, one agent per node), so a script written for it
    runs unchanged: ``LOCAL_RANK`` is the rank on its node, ``GROUP_RANK``
    the node's, and ``TORCHELASTIC_RESTART_COUNT`` counts launches before
    this one (resizes and restarts alike: each resumes from a checkpoint).
    ``PYTHONPATH`` starts with ``entry.SITE``, a cold worker's ``sitecustomize``.
    """
    threads = str(max(len(w.cpus), 1))
    place = w.place or RankPlace(w.rank, w.world, 0, 1)
    base = clean_env()
    if w.uid is not None:
        base["HOME"] = home_for(w.uid, w.job_dir)
    return {
        **base,
        **env,
        "RINGLEADER_JOB_ID": w.job_id,
        "RINGLEADER_JOB_DIR": str(w.job_dir),
        "RINGLEADER_GENERATION": str(w.generation),
        "RANK": str(w.rank),
        "WORLD_SIZE": str(w.world),
        "LOCAL_RANK": str(place.local_rank),
        "LOCAL_WORLD_SIZE": str(place.local_world),
        "GROUP_RANK": str(place.group_rank),
        "GROUP_WORLD_SIZE": str(place.group_world),
        "ROLE_NAME": "default",
        "ROLE_RANK": str(w.rank),
        "ROLE_WORLD_SIZE": str(w.world),
        "TORCHELASTIC_RESTART_COUNT": str(max(w.generation - 1, 0)),
        "TORCHELASTIC_MAX_RESTARTS": str(w.max_restarts),
        "TORCHELASTIC_RUN_ID": w.job_id,
        "TORCHELASTIC_USE_AGENT_STORE": "False",
        "MASTER_ADDR": w.master_addr,
        "MASTER_PORT": str(w.master_port),
        "RINGLEADER_DEVICE": "cuda" if w.cuda else "cpu",
        "CUDA_VISIBLE_DEVICES": w.cuda_visible,
        "RINGLEADER_THREADS": threads,
        "OMP_NUM_THREADS": threads,
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": python_path(env.get("PYTHONPATH")),
        "RINGLEADER_LAUNCH_T": repr(time.time()),
    }


def spawn_worker(
    w: WorkerLaunch,
    command: Sequence[str],
    env: Mapping[str, str],
    *,
    own_session: bool = True,
) -> subprocess.Popen[bytes]:
    """Start one worker under the launch wrapper, its output appended to its rank's log.

    ``own_session``: the worker outlives whoever started it (the local server,
    so a restarted server adopts it); without it, it dies with its starter (a
    Ray actor, so a lost node takes its workers with it).
    """
    # The wrapper opens the log itself, as the job's user (``wrapper.log_to``).
    return subprocess.Popen(
        wrapper_argv(w, command, die_with_parent=not own_session),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=worker_env(w, env),
        start_new_session=own_session,
        cwd=w.job_dir,
    )


def wrapper_argv(
    w: WorkerLaunch, command: Sequence[str], *, die_with_parent: bool = False
) -> list[str]:
    """The launch wrapper's command line for ``w``: how every executor starts a rank
    cold, here or on another host (``ringleader.slurm.rank`` execs it)."""
    return [
        sys.executable,
        "-m",
        "ringleader.runtime.workers.launch",
        "--job-dir",
        str(w.job_dir),
        "--generation",
        str(w.generation),
        "--rank",
        str(w.rank),
        "--cpus",
        ",".join(map(str, w.cpus)),
        "--log",
        str(w.job_dir / "logs" / f"rank{w.rank}.log"),
        f"--banner={_banner(w)}",  # one token: the banner starts with dashes
        *(["--workdir", w.workdir] if w.workdir else []),
        *(["--uid", str(w.uid)] if w.uid is not None else []),
        *(["--die-with-parent"] if die_with_parent else []),
        "--",
        *command,
    ]


def _banner(w: WorkerLaunch) -> str:
    return f"--- generation {w.generation}, rank {w.rank}/{w.world}, device {w.where} ---\n"


def _warm_launch(
    w: WorkerLaunch,
    entry: tuple[str, ...],
    env: Mapping[str, str],
    *,
    execs: tuple[str, ...] = (),
) -> WarmLaunch:
    job_dir = w.job_dir.absolute()  # the fork server runs in /
    return WarmLaunch(
        job_dir=str(job_dir),
        generation=w.generation,
        rank=w.rank,
        cpus=w.cpus,
        entry=entry,
        env=dict(env),
        log=str(job_dir / "logs" / f"rank{w.rank}.log"),
        banner=_banner(w),
        workdir=w.workdir or "",
        uid=w.uid,
        execs=execs,
    )
