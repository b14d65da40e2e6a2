"""How virtual devices share a machine's CPU cores.

Without GPUs the local runtime runs each worker on a virtual device pinned to
CPU cores: an even share of the cores when there are more cores than devices,
else one core that devices take round-robin (4 devices on 2 cores: devices 0
and 2 share core 0). The executor pins workers by this rule and the fidelity
replay slows co-located workers by it, so it is written once, here.
"""

from __future__ import annotations

from collections.abc import Sequence


def device_cores(index: int, devices: int, cores: Sequence[int]) -> list[int]:
    """The cores a worker on virtual device ``index`` of ``devices`` is pinned to."""
    n = len(cores)
    if n == 0:
        raise ValueError("no CPU cores to pin to")
    if devices >= n:
        return [cores[index % n]]
    per = n // devices
    return list(cores[index * per : (index + 1) * per])
