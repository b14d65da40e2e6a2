"""What the controller remembers about each live gang between ticks, in one record.

The store holds a job's durable state. These are the loop's own clocks and
marks for the generation that runs now: when its GPU time was last counted,
when a stop was asked, which ranks have had their SIGTERM. They live in the
process, so a controller restarted after a crash starts them afresh (a stop's
grace then counts from its first look), and they are forgotten at once when
the gang settles, so the next generation starts with clean ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ringleader.runtime.control.lingering import Linger


@dataclass(slots=True)
class Gang:
    """One job's running generation, as the loop tracks it."""

    held_since: float | None = None
    """When its GPU time was last added to its attained service."""
    stop_sent: float | None = None
    """When its current stop was asked for: it is killed ``stop_grace_s`` later."""
    stop_killed: bool = False
    """Killed because the stop it was asked for did not come: settled as stopped."""
    terminated: set[int] = field(default_factory=set)
    """Ranks sent SIGTERM for the current stop (retried for the rest at each look)."""
    launched: float | None = None
    """When this controller launched it, while none of its ranks has been seen running
    (None, while some are starting: an earlier controller launched it)."""
    partial_since: float | None = None
    """Since when some of its ranks have not said they started."""
    logs_checked: float = 0.0
    """When its logs were last checked against their cap (and its progress for ``done``)."""
    said_done: bool = False
    """The job library said ``done`` for this generation (read with the log check)."""
    linger: Linger | None = None
    """Its work is done and some ranks stay (``control.lingering``)."""
    stepped: tuple[int, float] | None = None
    """The steps this generation had reported at a look, and since when (a stall's clock)."""
    frozen: bool = False
    """Suspended by its executor too (``Executor.freeze``), after its ranks said so."""
    stall_charged: bool = False
    """Killed for a second stall with no step between: settled as the job's failure."""
    failure_killed: bool = False
    """Killed because a rank failed: settled as the job's failure, even where the kill
    leaves ranks the executor calls lost (Ray's actors go with the kill)."""


class Gangs:
    """Every live gang's ``Gang``, made at first use and dropped when it settles."""

    __slots__ = ("_by_job",)

    def __init__(self) -> None:
        self._by_job: dict[str, Gang] = {}

    def of(self, job_id: str) -> Gang:
        gang = self._by_job.get(job_id)
        if gang is None:
            gang = self._by_job[job_id] = Gang()
        return gang

    def forget(self, job_id: str) -> Gang:
        """Drop the job's record (its gang has settled); the record it had."""
        return self._by_job.pop(job_id, None) or Gang()

    def __len__(self) -> int:
        return len(self._by_job)
