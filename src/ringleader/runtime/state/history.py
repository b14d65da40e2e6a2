"""A real run's GPU usage over time, rebuilt from the store's job events.

The runtime records ``launched`` (with its worker count) and the events that
end a generation; replaying them gives the same ``UsagePoint`` timeline the
simulator produces, so ``ringleader.metrics`` computes utilisation the same way
for both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ringleader.metrics import UsagePoint

_ENDS = {"stopped", "succeeded", "failed", "cancelled", "restarting"}


def usage_from_events(events: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[UsagePoint]:
    """Busy GPUs and jobs in the system after every event, in time order."""
    changes: list[tuple[float, str, str, int]] = []
    for job_id, job_events in events.items():
        for e in job_events:
            changes.append((float(e["t"]), job_id, str(e["kind"]), int(e.get("workers", 0))))
    changes.sort()
    running: dict[str, int] = {}
    present: set[str] = set()
    points: list[UsagePoint] = []
    for t, job_id, kind, workers in changes:
        if kind == "submitted":
            present.add(job_id)
        elif kind == "launched":
            running[job_id] = workers
        elif kind in _ENDS:
            running.pop(job_id, None)
            if kind in ("succeeded", "failed", "cancelled"):
                present.discard(job_id)
        busy = sum(running.values())
        point = UsagePoint(t, busy, busy, len(present))
        if points and points[-1].time == t:
            points[-1] = point
        else:
            points.append(point)
    return points
