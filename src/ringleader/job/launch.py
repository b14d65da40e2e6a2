"""Where and as what a worker runs: what the scheduler's launch told it, from its environment."""

from __future__ import annotations

import os
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
