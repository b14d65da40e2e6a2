"""What a controller is told at start: its state folder, policy, clocks and caps.

Its own module so that the controller's halves (acting, settling) can read
the settings without importing the controller that holds them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ringleader.policy.model.plan import Decider
from ringleader.runtime.control import lingering
from ringleader.runtime.control.traffic import TrafficControl
from ringleader.runtime.workers.bounded import LOG_CAP_BYTES, PROGRESS_CAP_BYTES

TICK_S = 0.5
"""How often a controller looks at its jobs, and decides where something happened."""


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    state_dir: Path
    policy: Decider
    round_s: float = 30.0
    tick_s: float = TICK_S
    launch_timeout_s: float = 120.0
    exit_grace_s: float = lingering.GRACE_S
    """How long a rank may stay, idle, once its job's work is done (``control.lingering``)."""
    restart_s: float = 3.0
    """A resize's cost until a job's own is measured: a cold checkpoint-stop-restart of
    a small ResNet here (bench/results/resize.json, medians 2.9-3.4 s)."""
    log_cap_bytes: int = LOG_CAP_BYTES
    """A rank's log is rotated to ``.1`` past this (0: never; ``workers.bounded``)."""
    progress_cap_bytes: int = PROGRESS_CAP_BYTES
    """The progress file is rotated to ``.1`` past this (0: never)."""
    quotas: Callable[[], Mapping[str, int]] = dict
    """Each user's GPU quota, read at every decision (``ringleader.spine.quota``)."""
    run_as: Callable[[str], int | None] | None = None
    """The uid a user's jobs run as (None: unknown user); None: as the server's own user."""
    traffic: TrafficControl | None = None
    """Applies the plan's traffic ranks on this host's NIC (None: no ``--traffic-device``)."""

    def job_dir(self, job_id: str) -> Path:
        """Where a job's control file, progress, logs and checkpoints live."""
        return self.state_dir / "jobs" / job_id
