"""What co-located workers share besides GPUs, for the simulator.

On a GPU cluster a worker owns its GPU and the engine needs nothing here. On
the local runtime's virtual devices, workers share CPU cores, and a worker on
a core with another runs at about half speed; the fidelity replay gives the
simulator a ``Host`` so that it charges what the real run paid.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ringleader.perf.cores import device_cores
from ringleader.policy.model.views import Device


class Host(Protocol):
    """The resource each device's worker runs on, and how sharing one slows it."""

    def resource(self, device: Device) -> Hashable:
        """What a worker on ``device`` shares with workers on devices that map to the same."""
        ...

    def speed(self, workers: int) -> float:
        """Speed of each of ``workers`` running workers on one resource, relative to alone."""
        ...


@dataclass(frozen=True, slots=True)
class SharedCores:
    """Virtual devices pinned to CPU cores as the local executor pins them.

    Each worker is one busy thread per core it is given, so ``n`` workers on
    one core each get ``1/n`` of it (the kernel's fair share).
    """

    devices: int
    cores: Sequence[int]

    def resource(self, device: Device) -> Hashable:
        return (device.node, tuple(device_cores(device.index, self.devices, self.cores)))

    def speed(self, workers: int) -> float:
        return 1.0 / max(workers, 1)


@dataclass(frozen=True, slots=True)
class SharedMachine:
    """Virtual devices on one machine's ``cores``, their workers not pinned: the Slurm
    lab's nodes, which are namespaces of this one host.

    The kernel spreads ``n`` busy single-threaded workers over the cores, so
    each runs at ``cores / n`` of alone once they outnumber the cores.
    ``cores`` is what the workers have: the machine's, less what its other
    processes kept busy (``fidelity.machine``), so it need not be whole.
    """

    cores: float

    def resource(self, device: Device) -> Hashable:
        return "machine"

    def speed(self, workers: int) -> float:
        return min(1.0, self.cores / max(workers, 1))
