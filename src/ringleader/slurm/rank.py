"""``python -m ringleader.slurm.rank RUN_DIR``: one task of a gang's Slurm step becomes its rank.

srun starts this once per task. It reads the launch the executor wrote for its
rank (``rank<SLURM_PROCID>.launch.json``: the launch wrapper's command line and
the worker's environment, torchrun's contract included) and ``exec``-s the same
launch wrapper the local executor starts, so the job library, control files,
progress and checkpoints work as they do there. On a node with GPUs, a rank
takes the one of Slurm's ``CUDA_VISIBLE_DEVICES`` at its local rank; the
executor, on the controller's host, cannot know which. On a partition
ringleader time-slices (no GRES) the launch names the rank's GPU itself.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def launch_file(run_dir: Path, rank: int) -> Path:
    return run_dir / f"rank{rank}.launch.json"


def real_gpus() -> bool:
    """Whether this node has NVIDIA GPUs (the lab's are character devices, not GPUs):
    asked here, on the node, where the driver is."""
    try:
        return any(Path("/proc/driver/nvidia/gpus").iterdir())
    except OSError:
        return False


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or "SLURM_PROCID" not in os.environ:
        raise SystemExit("usage: srun ... python -m ringleader.slurm.rank RUN_DIR")
    rank = int(os.environ["SLURM_PROCID"])
    spec = json.loads(launch_file(Path(args[0]), rank).read_text())
    env = dict(spec["env"])
    bound = os.environ.get("CUDA_VISIBLE_DEVICES")
    if bound and real_gpus():
        # Slurm binds the node's share of the job's GPUs to every task on it; each
        # rank takes the one of its place among them, as the local executor gives it.
        local = int(env.get("LOCAL_RANK", "0"))
        devices = bound.split(",")
        env["CUDA_VISIBLE_DEVICES"] = devices[local % len(devices)]
        env["RINGLEADER_DEVICE"] = "cuda"
    elif "gpu" in spec and real_gpus():
        # A partition ringleader time-slices: no GRES, so the Plan's device is the rank's.
        env["CUDA_VISIBLE_DEVICES"] = str(int(spec["gpu"]))
        env["RINGLEADER_DEVICE"] = "cuda"
    for key in ("SLURM_JOB_ID", "SLURM_STEP_ID", "SLURMD_NODENAME", "SLURM_PROCID"):
        if key in os.environ:
            env[key] = os.environ[key]
    argv_ = spec["argv"]
    os.execvpe(argv_[0], argv_, env)


if __name__ == "__main__":
    main()
