"""The local executor: a job's workers as processes on this machine.

Devices are the machine's GPUs when it has any (each worker sees its own
through ``CUDA_VISIBLE_DEVICES``), otherwise ``gpus`` virtual devices on the
CPU, each worker pinned to its device's share of the cores. Workers run in
their own session, so they survive a controller crash and are adopted by the
next one; their output goes to ``<job_dir>/logs/rank<r>.log``.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from ringleader.policy.views import ClusterView, Device, Node
from ringleader.runtime.executor.base import GangStatus
from ringleader.runtime.launch import run_dir
from ringleader.runtime.procs import alive, kill_group

NODE = "local"


def real_gpus() -> int:
    """How many NVIDIA GPUs this machine has (0 without a driver)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return 0
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class LocalExecutor:
    name = "local"

    def __init__(self, gpus: int | None = None) -> None:
        physical = real_gpus()
        self.cuda = physical > 0
        count = gpus if gpus is not None else (physical or 1)
        if self.cuda:
            count = min(count, physical)
        if count < 1:
            raise ValueError(f"need at least one device, got {count}")
        self.gpus = count
        self.cores = sorted(os.sched_getaffinity(0))

    def cluster(self) -> ClusterView:
        return ClusterView((Node(NODE, self.gpus),))

    def cpus_for(self, device: int) -> list[int]:
        """Cores for a virtual device: an even share, or one core shared round-robin."""
        n = len(self.cores)
        if self.gpus >= n:
            return [self.cores[device % n]]
        per = n // self.gpus
        return self.cores[device * per : (device + 1) * per]

    def launch(
        self,
        job_id: str,
        job_dir: Path,
        generation: int,
        command: Sequence[str],
        devices: Sequence[Device],
        env: Mapping[str, str],
    ) -> None:
        logs = job_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        run_dir(job_dir, generation).mkdir(parents=True, exist_ok=True)
        port = free_port()
        for rank, device in enumerate(devices):
            cpus = self.cpus_for(device.index)
            worker_env = {
                **os.environ,
                # `python` in a job's command means the interpreter ringleader runs in.
                "PATH": os.pathsep.join(
                    [str(Path(sys.executable).parent), os.environ.get("PATH", "")]
                ),
                **env,
                "RINGLEADER_JOB_ID": job_id,
                "RINGLEADER_JOB_DIR": str(job_dir),
                "RINGLEADER_GENERATION": str(generation),
                "RANK": str(rank),
                "LOCAL_RANK": str(rank),
                "WORLD_SIZE": str(len(devices)),
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port),
                "RINGLEADER_DEVICE": "cuda" if self.cuda else "cpu",
                "CUDA_VISIBLE_DEVICES": str(device.index) if self.cuda else "",
                "RINGLEADER_THREADS": str(len(cpus)),
                "OMP_NUM_THREADS": str(len(cpus)),
                "PYTHONUNBUFFERED": "1",
                "RINGLEADER_LAUNCH_T": repr(time.time()),
            }
            log = open(logs / f"rank{rank}.log", "ab")  # noqa: SIM115 - handed to the child
            log.write(
                f"--- generation {generation}, rank {rank}/{len(devices)}, "
                f"device {device.node}:{device.index} ---\n".encode()
            )
            log.flush()
            try:
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "ringleader.runtime.launch",
                        "--job-dir",
                        str(job_dir),
                        "--generation",
                        str(generation),
                        "--rank",
                        str(rank),
                        "--cpus",
                        ",".join(map(str, cpus)),
                        "--",
                        *command,
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=worker_env,
                    start_new_session=True,
                    cwd=job_dir,
                )
            finally:
                log.close()

    @staticmethod
    def _pids(job_dir: Path, generation: int) -> dict[int, tuple[int, int]]:
        out: dict[int, tuple[int, int]] = {}
        for path in run_dir(job_dir, generation).glob("rank*.pid"):
            try:
                pid, ticks = (int(v) for v in path.read_text().split())
            except (OSError, ValueError):
                continue
            out[int(path.stem.removeprefix("rank"))] = (pid, ticks)
        return out

    def status(self, job_dir: Path, generation: int, world: int) -> GangStatus:
        here = run_dir(job_dir, generation)
        exits: dict[int, int] = {}
        for path in here.glob("rank*.exit"):
            try:
                exits[int(path.stem.removeprefix("rank"))] = int(path.read_text())
            except (OSError, ValueError):
                continue
        pids = self._pids(job_dir, generation)
        running = sum(1 for r, (p, t) in pids.items() if r not in exits and alive(p, t))
        # A rank that has written neither a pid nor an exit file is still starting.
        starting = sum(1 for r in range(world) if r not in pids and r not in exits)
        return GangStatus(world, running, exits, starting)

    def kill(self, job_dir: Path, generation: int) -> None:
        for pid, ticks in self._pids(job_dir, generation).values():
            kill_group(pid, ticks)
