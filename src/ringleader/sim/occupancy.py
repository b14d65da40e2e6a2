"""Which GPUs the simulated jobs use, kept by change instead of counted at every event.

The engine needs three figures after each placement: the GPUs some job runs
on, the GPUs some job holds (running, suspended or reserved), and whether any
GPU runs two jobs (only then must it work out who packs with whom). Counted
from scratch they walk every device of every job, where a decision moves a few
jobs. Here a job's devices are taken out before it changes and put back after,
so each placement costs what it moved.

Counts are keyed by the ``Device`` itself: it hashes as ``(node, index)`` does
(worked out once per device) and a job's own devices find their entries by
identity, not by a ``(node, index)`` tuple built, hashed and compared field by
field per device per change.
"""

from __future__ import annotations

from ringleader.policy.model.views import Device


class Occupancy:
    """Per GPU, how many jobs run on it and how many hold it."""

    __slots__ = ("_held", "_running", "shared")

    def __init__(self) -> None:
        self._running: dict[Device, int] = {}
        self._held: dict[Device, int] = {}
        self.shared = 0
        """GPUs that two or more jobs run on (0: nobody packs, the usual case)."""

    @property
    def busy(self) -> int:
        """GPUs on which some job runs (a packed GPU counts once)."""
        return len(self._running)

    @property
    def held(self) -> int:
        """GPUs some job holds: running, suspended or reserved."""
        return len(self._held)

    def add(self, devices: tuple[Device, ...], workers: int, suspended: bool) -> None:
        """A job now holds ``devices`` and runs on the first ``workers`` unless suspended."""
        held = self._held
        for d in devices:
            held[d] = held.get(d, 0) + 1
        self._run(devices, workers, suspended)

    def remove(self, devices: tuple[Device, ...], workers: int, suspended: bool) -> None:
        """The inverse of ``add`` with the same arguments."""
        held = self._held
        for d in devices:
            n = held[d] - 1
            if n:
                held[d] = n
            else:
                del held[d]
        self._stop(devices, workers, suspended)

    def change(
        self,
        was: tuple[tuple[Device, ...], int, bool],
        devices: tuple[Device, ...],
        workers: int,
        suspended: bool,
    ) -> None:
        """``remove(*was)`` then ``add(devices, workers, suspended)``; on the same GPUs (a
        time-sliced job suspended or resumed, as most changes are) only what runs
        changes, so the GPUs held are left as they are."""
        held, ran, paused = was
        if held is devices or held == devices:
            self._stop(held, ran, paused)
            self._run(devices, workers, suspended)
        else:
            self.remove(held, ran, paused)
            self.add(devices, workers, suspended)

    def _run(self, devices: tuple[Device, ...], workers: int, suspended: bool) -> None:
        running = self._running
        if workers > 0 and not suspended:
            for d in devices[:workers]:
                n = running.get(d, 0) + 1
                running[d] = n
                if n == 2:
                    self.shared += 1

    def _stop(self, devices: tuple[Device, ...], workers: int, suspended: bool) -> None:
        running = self._running
        if workers > 0 and not suspended:
            for d in devices[:workers]:
                n = running[d] - 1
                if n == 1:
                    self.shared -= 1
                if n:
                    running[d] = n
                else:
                    del running[d]
