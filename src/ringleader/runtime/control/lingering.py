"""Lingering ranks: a rank whose job's work is done and that never exits is ended.

A rank can finish training and then not exit: torch's gloo teardown
deadlock (``workers.process_groups``), a non-daemon thread that never
returns, a barrier its peers will never reach. Left alone it holds its GPUs
and every job queued behind it waits for ever. The work is done once every
rank that has exited did so with status 0, or once the job library said
``done`` for this generation. A rank still there ``grace_s`` later that has
used under ``BUSY_FRACTION`` of a core meanwhile (a hang sleeps; a last
evaluation or save computes) is ended, and the job succeeds with a warning
naming the ranks. A rank whose CPU use the executor cannot see (another
node) counts as idle.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ringleader.runtime.workers.executor.base import GangStatus

GRACE_S = 30.0
"""How long a rank may stay once its job's work is done, by default."""
BUSY_FRACTION = 0.05
"""Of one core, over the grace: a rank that used more is still working."""


@dataclass(slots=True)
class Linger:
    """One gang's lingering ranks, while its work is done and some ranks stay."""

    since: float
    cpu_at_start: Mapping[int, float] = field(default_factory=dict)
    ended: tuple[int, ...] = ()
    """The ranks ended for lingering (set once they are killed)."""


def work_done(status: GangStatus, said_done: bool) -> bool:
    """Whether ranks are still running although the gang's work is done."""
    if status.finished or status.alive == 0 or status.starting:
        return False
    exited_cleanly = bool(status.exits) and all(code == 0 for code in status.exits.values())
    return exited_cleanly or said_done


def idle_ranks(
    linger: Linger, status: GangStatus, cpu_now: Mapping[int, float], now: float
) -> tuple[int, ...] | None:
    """The ranks to end now, or None while the grace runs or any rank still computes."""
    waited = now - linger.since
    staying = tuple(r for r in range(status.world) if r not in status.exits)
    for rank in staying:
        before, after = linger.cpu_at_start.get(rank), cpu_now.get(rank)
        if before is not None and after is not None and after - before > BUSY_FRACTION * waited:
            return None
    return staying


def warning(ranks: tuple[int, ...], grace_s: float) -> str:
    """What the job's history and ``show`` say about ranks ended for lingering."""
    which = ", ".join(str(r) for r in ranks)
    return (
        f"rank{'s' if len(ranks) > 1 else ''} {which} did not exit {grace_s:g} s after the "
        "job's work was done (its other ranks had exited 0, or it had said done) and used "
        "almost no CPU meanwhile: ended, and the job counted as succeeded. A script that "
        "hangs at exit (see docs/runtime.md, Faults) does this."
    )
