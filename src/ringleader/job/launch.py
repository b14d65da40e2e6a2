"""Where and as what a worker runs: what the scheduler's launch told it, from its environment."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Launch:
    """Where and as what this process runs, as the scheduler launched it."""

    job_id: str
    job_dir: Path
    generation: int
    rank: int
    world_size: int
    master_addr: str
    master_port: int
    device: str

    @classmethod
    def from_env(cls) -> Launch:
        env = os.environ
        missing = [k for k in ("RINGLEADER_JOB_DIR",) if k not in env]
        if missing:
            raise RuntimeError(
                f"{', '.join(missing)} not set: run this script through ringleader "
                "(ringleader submit), or set the variables by hand for a local try"
            )
        return cls(
            job_id=env.get("RINGLEADER_JOB_ID", "local"),
            job_dir=Path(env["RINGLEADER_JOB_DIR"]),
            generation=int(env.get("RINGLEADER_GENERATION", "0")),
            rank=int(env.get("RANK", "0")),
            world_size=int(env.get("WORLD_SIZE", "1")),
            master_addr=env.get("MASTER_ADDR", "127.0.0.1"),
            master_port=int(env.get("MASTER_PORT", "29500")),
            device=env.get("RINGLEADER_DEVICE", "cpu"),
        )


def world_of() -> tuple[int, int]:
    """This process's rank and world: the process group's, else the environment's."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except ImportError:
        pass
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def torchrun_launch(checkpoints: str) -> tuple[Launch, bool]:
    """This process as ringleader or torchrun launched it, and whether it resumes from a
    checkpoint (under torchrun, in ``checkpoints/<run id>`` unless
    ``RINGLEADER_CHECKPOINT_DIR`` names another place)."""
    env = os.environ
    if "RINGLEADER_JOB_DIR" in env:
        return Launch.from_env(), True
    import torch

    run_id = env.get("TORCHELASTIC_RUN_ID", "local")
    default = Path(checkpoints) / re.sub(r"[^A-Za-z0-9_.-]", "_", run_id)[:100]
    job_dir = Path(env.get("RINGLEADER_CHECKPOINT_DIR") or default).absolute()
    job_dir.mkdir(parents=True, exist_ok=True)
    restart = int(env.get("TORCHELASTIC_RESTART_COUNT", "0"))
    rank, world = world_of()
    launch = Launch(
        job_id=run_id,
        job_dir=job_dir,
        generation=restart + 1,
        rank=rank,
        world_size=world,
        master_addr=env.get("MASTER_ADDR", "127.0.0.1"),
        master_port=int(env.get("MASTER_PORT", "29500")),
        device="cuda" if torch.cuda.is_available() else "cpu",
    )
    return launch, restart > 0
