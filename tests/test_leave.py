"""A rank that leaves its group as ``elastic.epochs`` does never deadlocks in gloo's teardown."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

LEAVE_LOOP = Path(__file__).parent / "data" / "ddp_exit" / "leave_loop.py"


def test_leaving_the_group_then_freeing_the_ddp_model_never_deadlocks() -> None:
    # With torch's own barrier() and destroy_process_group() in its place, this loop
    # deadlocked in ~ProcessGroupGloo within 120 s in two runs of two here (500
    # rounds; ``leave_loop.py 500 plain``): the barrier's work was freed on gloo's
    # thread while the main thread, GIL held, tore the group down. ranks.leave: 500
    # rounds in 7-9 s. Seen first as rank 1 of tests/data/noise_check.py stuck at exit.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RANK", "WORLD_SIZE"))}
    out = subprocess.run(
        [sys.executable, str(LEAVE_LOOP), "300"],
        capture_output=True,
        text=True,
        timeout=90,
        env=env,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "300 rounds" in out.stdout
