"""Where a job's time went once failures and checkpoints cost it: ETTR and lost GPU-hours.

Effective training time ratio (ETTR), as Meta's Llama 3 report and its
follow-ups use it: the time a job made progress that it kept, over the wall
time from its submission to its end. The rest is lost to a cause: waiting
for GPUs (``queueing``; after an interruption too), starting up again
(``restart``), writing checkpoints (``checkpoint``), and redoing what a
failure threw away (``failure``). Each is kept in seconds and, at the GPUs
the job held or waited for, in GPU-seconds.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

CAUSES = ("failure", "checkpoint", "restart", "queueing")


@dataclass(slots=True)
class JobLedger:
    """One job's interruptions, and its time by what it was spent on."""

    submitted_at: float
    gpus: int
    """The GPUs it asked for: what its waits are counted at."""
    interruptions: int = 0
    by_cause: dict[str, int] = field(default_factory=dict)
    """Interruptions by what caused them (``Outage.cause``)."""
    useful_s: float = 0.0
    useful_gpu_s: float = 0.0
    lost_s: dict[str, float] = field(default_factory=lambda: dict.fromkeys(CAUSES, 0.0))
    lost_gpu_s: dict[str, float] = field(default_factory=lambda: dict.fromkeys(CAUSES, 0.0))
    ended_at: float | None = None

    def lose(self, cause: str, seconds: float, gpus: int) -> None:
        if seconds > 0:
            self.lost_s[cause] += seconds
            self.lost_gpu_s[cause] += seconds * gpus

    def ettr(self, now: float) -> float:
        """Useful time over the wall time since submission (to its end, or ``now``)."""
        wall = (self.ended_at if self.ended_at is not None else now) - self.submitted_at
        return self.useful_s / wall if wall > 0 else 0.0


@dataclass(frozen=True, slots=True)
class ClusterLedger:
    """The run's totals: GPU-hours useful and lost by cause, interruptions, and ETTR."""

    useful_gpu_h: float
    lost_gpu_h: dict[str, float]
    interruptions: int
    by_cause: dict[str, int]
    ettr: float
    """Useful GPU-hours over all the GPU-hours jobs held or waited for."""

    @classmethod
    def of(cls, ledgers: Iterable[JobLedger]) -> ClusterLedger:
        useful, interruptions = 0.0, 0
        lost = dict.fromkeys(CAUSES, 0.0)
        causes: dict[str, int] = {}
        for ledger in ledgers:
            useful += ledger.useful_gpu_s
            interruptions += ledger.interruptions
            for cause, gpu_s in ledger.lost_gpu_s.items():
                lost[cause] += gpu_s
            for cause, n in ledger.by_cause.items():
                causes[cause] = causes.get(cause, 0) + n
        spent = useful + sum(lost.values())
        return cls(
            useful / 3600,
            {c: v / 3600 for c, v in lost.items()},
            interruptions,
            causes,
            useful / spent if spent > 0 else 0.0,
        )
