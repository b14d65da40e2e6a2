"""A step's device time: what a stand-in for a GPU's compute spends, which no CPU sharing slows.

On a machine without GPUs, ``ringleader.workloads.goodput`` stands in for a
GPU's compute by sleeping (``--step-ms`` per micro-batch, and
``--compute-ms-per-example``). A worker that sleeps does not compute on its
core, so when virtual devices share cores only the rest of its step slows,
and a job measured while four workers shared two cores is not half as fast
alone. The fidelity run knows these times from the workload file, as a GPU
cluster would know that a device's kernels do not queue behind another job's
CPU threads: ``measure`` takes the sharing out of the rest of the step only,
and the replay puts it back the same way (``AdaptedProfile.host_speed``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DeviceTime:
    """Seconds of device time per micro-batch and per example, and a GPU's most at once."""

    step_s: float = 0.0
    example_s: float = 0.0
    per_gpu_max: int | None = None
    """The most examples a micro-batch takes (None: a share is one micro-batch)."""

    def seconds(self, share: float) -> float:
        """Device seconds of one step at ``share`` examples per GPU."""
        if share <= 0:
            return 0.0
        passes = math.ceil(share / self.per_gpu_max) if self.per_gpu_max else 1
        return passes * self.step_s + share * self.example_s

    def slowed(self, speed: float, step_s: float, share: float) -> float:
        """The speed of a step of ``step_s`` seconds at ``share`` whose CPU part runs at
        ``speed`` of alone: its device time is not slowed."""
        device = min(self.seconds(share), step_s)
        if device <= 0 or speed <= 0 or step_s <= 0:
            return speed
        return step_s / (device + (step_s - device) / speed)


NONE = DeviceTime()
