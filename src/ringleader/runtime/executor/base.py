"""The executor interface the controller relies on, and nothing local about it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ringleader.policy.views import ClusterView, Device


@dataclass(frozen=True, slots=True)
class GangStatus:
    """What a job's workers of one generation are doing."""

    world: int
    alive: int
    exits: Mapping[int, int] = field(default_factory=dict)
    """Exit code per rank that has exited (negative: killed by that signal)."""
    starting: int = 0
    """Ranks launched that have not yet said they started."""
    lost: int = 0
    """Ranks whose machine went away (a lost node): not the job's fault."""

    @property
    def finished(self) -> bool:
        return self.alive == 0 and self.starting == 0

    @property
    def failed(self) -> bool:
        return any(code != 0 for code in self.exits.values()) or (
            self.finished and len(self.exits) < self.world
        )


class Executor(Protocol):
    name: str

    def cluster(self) -> ClusterView: ...

    def launch(
        self,
        job_id: str,
        job_dir: Path,
        generation: int,
        command: Sequence[str],
        devices: Sequence[Device],
        env: Mapping[str, str],
    ) -> None: ...

    def status(self, job_dir: Path, generation: int, world: int) -> GangStatus: ...

    def kill(self, job_dir: Path, generation: int) -> None: ...
