"""``python -m ringleader.slurm.rank RUN_DIR``: one task of a gang's Slurm step becomes its rank.

srun starts this once per task. It reads the launch the executor wrote for its
rank (``rank<SLURM_PROCID>.launch.json``: the launch wrapper's command line and
the worker's environment, torchrun's contract included) and ``exec``-s the same
launch wrapper the local executor starts, so the job library, control files,
progress and checkpoints work as they do there. The GPUs are the ones Slurm
bound to the task: its ``CUDA_VISIBLE_DEVICES`` replaces the executor's guess.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def launch_file(run_dir: Path, rank: int) -> Path:
    return run_dir / f"rank{rank}.launch.json"


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or "SLURM_PROCID" not in os.environ:
        raise SystemExit("usage: srun ... python -m ringleader.slurm.rank RUN_DIR")
    rank = int(os.environ["SLURM_PROCID"])
    spec = json.loads(launch_file(Path(args[0]), rank).read_text())
    env = dict(spec["env"])
    bound = os.environ.get("CUDA_VISIBLE_DEVICES")
    if bound is not None and env.get("RINGLEADER_DEVICE") == "cuda":
        local = int(env.get("LOCAL_RANK", "0"))
        devices = bound.split(",")
        env["CUDA_VISIBLE_DEVICES"] = devices[local % len(devices)]
    for key in ("SLURM_JOB_ID", "SLURM_STEP_ID", "SLURMD_NODENAME", "SLURM_PROCID"):
        if key in os.environ:
            env[key] = os.environ[key]
    argv_ = spec["argv"]
    os.execvpe(argv_[0], argv_, env)


if __name__ == "__main__":
    main()
