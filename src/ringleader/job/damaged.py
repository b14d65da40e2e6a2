"""Every checkpoint of a job damaged: what the script says, and whether it goes on.

By default the job does not start over silently from step 0: it ends, and
the scheduler fails it at once instead of retrying into the same damage.
The job spec's ``on_bad_checkpoint: restart`` starts over, and says so.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import NoReturn

from ringleader.job.checkpoint import ON_BAD_CHECKPOINT_ENV, CheckpointsDamaged
from ringleader.job.control import append_progress
from ringleader.job.ending import exit_now

MAX_WHY = 1000
"""Characters of a reason kept in an event: the scheduler drops a line with a longer string."""


def fail_damaged(job_dir: Path, generation: int, err: CheckpointsDamaged) -> NoReturn:
    """Tell the scheduler and the user, and end the process with status 1.

    Every rank writes the event, not only rank 0: whichever rank exits
    first has the rest killed, and the scheduler must still find it. The
    exit skips teardown (``ending``): a DDP model and its gloo group can
    deadlock in it.
    """
    append_progress(
        job_dir,
        {
            "event": "checkpoints_damaged",
            "g": generation,
            "path": str(err.directory),
            "why": err.first_reason[:MAX_WHY],
            "t": time.time(),
        },
    )
    sys.stdout.flush()
    print(
        f"ringleader: every checkpoint in {err.directory} is damaged ({err.count}; first: "
        f"{err.first_reason}); not starting over. The job spec field "
        "`on_bad_checkpoint: restart` starts over from step 0 "
        f"({ON_BAD_CHECKPOINT_ENV}=restart outside ringleader).",
        file=sys.stderr,
        flush=True,
    )
    exit_now(1)


def warn_starting_over(directory: Path, skipped: list[str]) -> None:
    """Say, loudly, that every checkpoint was damaged and training starts from step 0."""
    print(
        f"ringleader: all {len(skipped)} checkpoint(s) in {directory} are "
        "damaged and on_bad_checkpoint is restart: STARTING OVER FROM STEP 0 "
        f"(the damaged files are kept as *.rlck.damaged; first: {skipped[0]})",
        file=sys.stderr,
        flush=True,
    )
