"""When a running job should finish, at the speed it was measured at on its GPUs.

The estimate is the plainest honest one: the epochs left, at the epochs per
second its minibatches took at its current world size (``observations``,
warm-up steps excluded). It knows nothing of resizes or time-slicing to
come, so a dashboard shows it as an estimate that moves with the plan.
"""

from __future__ import annotations

import math

from ringleader.runtime.state.rows import JobRow, State


def eta_s(row: JobRow) -> float | None:
    """Seconds left for a running job with a measured speed; None when unknown."""
    if row.state is not State.RUNNING or not row.spec.epochs or row.workers <= 0:
        return None
    seen = row.observations.get(str(row.workers))
    examples = row.shape.get("examples_per_epoch", 0.0)
    if not seen or examples <= 0:
        return None
    step_time, batch = seen[0], seen[3]
    if step_time <= 0 or batch <= 0:
        return None
    epochs_per_s = batch * row.workers / examples / step_time
    if not math.isfinite(epochs_per_s) or epochs_per_s <= 0:
        return None
    left = max(row.spec.epochs - row.epoch, 0.0) / epochs_per_s
    # The numbers are the job's own reports: absurd ones give no estimate, never a
    # value JSON cannot carry.
    return round(left, 1) if math.isfinite(left) else None
