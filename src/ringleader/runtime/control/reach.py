"""Whether what runs the cluster answers: the controller holds every job while it does not.

When Slurm's controller goes away, its nodes and the jobs' ranks run on, but
nothing can be known of them or done to them: a job that looks gone may only
be unheard of. So while the executor raises ``ExecutorUnavailable`` the
controller neither settles, decides nor acts; the API keeps serving, and
``GET /cluster`` says since when and why. Each tick asks the executor for
its nodes once; the first answer ends it, and the next decision picks up
where the last one left off.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("ringleader.controller")


@dataclass
class Reach:
    """The executor as the controller last found it: answering, or away since when and why."""

    away_since: float | None = None
    reason: str = ""

    @property
    def away(self) -> bool:
        return self.away_since is not None

    def lost(self, error: Exception, now: float) -> None:
        """It did not answer: logged once, as a warning (no traceback), when it goes."""
        self.reason = str(error)
        if self.away_since is None:
            self.away_since = now
            log.warning(
                "the cluster does not answer (%s); holding every job as it is until it does",
                self.reason,
            )

    def back(self, now: float) -> None:
        """It answered again."""
        if self.away_since is not None:
            log.warning("the cluster answers again after %.0f s", now - self.away_since)
        self.away_since, self.reason = None, ""

    def shown(self) -> dict[str, Any]:
        """For ``GET /cluster``."""
        if self.away_since is None:
            return {"available": True}
        return {"available": False, "unavailable_since": self.away_since, "reason": self.reason}
