"""Stalled gangs: a job that reports steps and stops reporting them is taken to hang.

A rank that hangs mid-run (a collective its peers never join, a wedged data
loader, a dead NFS mount) stops the whole gang: the others wait in the next
all-reduce, their processes alive, their GPUs held. Nothing exits, so only
the job's progress tells. A job whose spec states ``stall_s`` and whose
step has not moved for that long while it runs is killed and restarts from
its last checkpoint; only jobs whose current generation writes the job
library's progress are watched (a plain script's silence means nothing). A
second stall with no step since the first is the job's own failure (charged
to its retries): the same hang would come back for ever.
"""

from __future__ import annotations

from ringleader.runtime.control.gangs import Gang
from ringleader.runtime.control.progress import LIBRARY_GENERATION
from ringleader.runtime.state.rows import JobRow, State

STALLED = "stalled"
"""The stop reason of a gang ended for a stall."""
STALLED_AT = "stalled_at_step"
"""``JobRow.shape`` key: the step the job was at when it last stalled."""


def stalled(row: JobRow, gang: Gang, seen: int, now: float, startup_s: float) -> bool:
    """Whether ``row``'s gang has taken no new step for its ``stall_s`` (and start the
    clock, or move it on, where it has).

    ``seen``: the steps this generation has reported. They are counted, not read
    off ``row.step``: a generation restored from a checkpoint retakes steps the
    job had already reached. Before its first step the gang is starting
    (imports, rendezvous, a checkpoint to load), so it has ``startup_s`` if that
    is longer.
    """
    limit = row.spec.stall_s
    if limit is None or row.state is not State.RUNNING or row.stopping is not None:
        gang.stepped = None  # suspended or stopping: the clock starts again after
        return False
    if row.shape.get(LIBRARY_GENERATION) != row.generation:
        return False
    if gang.stepped is None or gang.stepped[0] != seen:
        gang.stepped = (seen, now)
        return False
    return now - gang.stepped[1] >= (limit if seen else max(limit, startup_s))


def again(row: JobRow) -> bool:
    """Whether this stall comes with no step since the job's last one (and mark it)."""
    before = row.shape.get(STALLED_AT)
    row.shape[STALLED_AT] = float(row.step)
    return before is not None and row.step <= before


def warning(row: JobRow, repeated: bool) -> str:
    """What the server's log says of a stall."""
    then = (
        "no step since its last stall either: counted as a failure"
        if repeated
        else "restarting it from its last checkpoint"
    )
    return (
        f"job {row.id}: no new step for {row.spec.stall_s:g} s at step {row.step} "
        f"(its stall_s); {then}"
    )
