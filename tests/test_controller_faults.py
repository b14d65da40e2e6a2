"""Controller reactions to executor faults that a test cannot cause for real cheaply.

A fake executor is used only here, for a gang that Ray placed in part (its
cluster shared with other work) or whose launch was lost — everything else
runs real processes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from ringleader.policy.catalog import policy_named
from ringleader.policy.model.views import ClusterView, Device
from ringleader.runtime.control.config import ControllerConfig
from ringleader.runtime.control.controller import Controller
from ringleader.runtime.state.rows import State
from ringleader.runtime.state.spec import parse_spec
from ringleader.runtime.state.store import Store
from ringleader.runtime.workers.executor.base import GangStatus


class HalfPlaced:
    """Every gang gets rank 0 running and the other ranks never placed."""

    name = "half-placed"
    running = 1
    adopted_start_s: float | None = None

    def __init__(self) -> None:
        self.launches: list[int] = []
        self.kills: list[int] = []

    def cluster(self) -> ClusterView:
        return ClusterView.uniform(2, 1)

    def launch(
        self,
        job_id: str,
        job_dir: Path,
        generation: int,
        command: Sequence[str],
        devices: Sequence[Device],
        env: Mapping[str, str],
        *,
        max_restarts: int = 0,
        workdir: str | None = None,
        uid: int | None = None,
    ) -> None:
        self.launches.append(generation)

    def on_exit(self, wake: object) -> None:
        pass  # exits are seen at each tick

    def status(self, job_dir: Path, generation: int, world: int) -> GangStatus:
        if generation in self.kills:
            return GangStatus(world, 0, dict.fromkeys(range(world), -9))
        return GangStatus(world, self.running, {}, world - self.running)

    def terminate(
        self, job_dir: Path, generation: int, skip: frozenset[int] = frozenset()
    ) -> set[int]:
        return set()  # never asked here: these tests request no stop

    def kill(self, job_dir: Path, generation: int) -> None:
        self.kills.append(generation)

    def cpu_s(self, job_dir: Path, generation: int) -> dict[int, float]:
        return {}

    def freeze(self, job_dir: Path, generation: int) -> None:
        pass  # never asked here: these tests suspend nothing

    def thaw(self, job_dir: Path, generation: int) -> None:
        pass


class NeverStarted(HalfPlaced):
    """Every gang's launch is lost: no rank ever starts (say, its launcher died)."""

    name = "never-started"
    running = 0


@pytest.mark.parametrize("executor_type", [HalfPlaced, NeverStarted])
def test_a_gang_placed_only_in_part_is_relaunched_after_the_launch_timeout(
    tmp_path: Path, executor_type: type[HalfPlaced]
) -> None:
    executor = executor_type()
    store = Store(tmp_path / "db.sqlite")
    config = ControllerConfig(tmp_path, policy_named("fifo"), launch_timeout_s=5.0)
    controller = Controller(store, executor, config)
    row = store.add(parse_spec({"name": "gang", "command": "true", "gpus": 2}))
    controller.tick(now=100.0)
    assert executor.launches == [1]
    controller.tick(now=101.0)  # first seen half placed
    controller.tick(now=105.0)  # within the timeout: wait
    assert executor.kills == []
    controller.tick(now=107.0)
    # Killed for the timeout, and again as it settles (what a rank left ends with it).
    assert executor.kills and set(executor.kills) == {1}
    again = store.get(row.id)
    assert again is not None
    events = [e for e in store.events(row.id) if e["kind"] == "stopped"]
    assert events and events[-1]["reason"] == "placement_timeout"
    assert again.attempts == 0  # not the job's failure
    controller.tick(now=108.0)
    assert executor.launches == [1, 2] and store.get(row.id).state is State.RUNNING  # type: ignore[union-attr]


class LaunchedByTheDead(NeverStarted):
    """As the local executor: a rank an earlier controller launched says so at once."""

    name = "launched-by-the-dead"
    adopted_start_s: float | None = 15.0


def test_a_launch_saved_by_a_server_killed_before_it_launched_is_made_soon_after_restart(
    tmp_path: Path,
) -> None:
    """A launch is saved before its processes exist. A server killed in between left
    the job to the 120 s launch timeout of the next server, which is meant for ranks
    waiting to be placed (a kill -9 test timed out on it in CI)."""
    executor = LaunchedByTheDead()
    store = Store(tmp_path / "db.sqlite")
    config = ControllerConfig(tmp_path, policy_named("fifo"))
    first = Controller(store, executor, config)
    row = store.add(parse_spec({"name": "gang", "command": "true", "gpus": 2}))
    first.tick(now=100.0)
    first.tick(now=101.0)
    first.tick(now=130.0)  # its own launch: waits the launch timeout for a placement
    assert executor.launches == [1] and executor.kills == []
    restarted = Controller(store, executor, config)  # the first was killed with -9
    restarted.tick(now=131.0)
    restarted.tick(now=146.0)  # within the grace
    assert executor.kills == []
    restarted.tick(now=146.5)
    assert set(executor.kills) == {1}
    events = [e for e in store.events(row.id) if e["kind"] == "stopped"]
    assert events and events[-1]["reason"] == "launch_lost"
    assert store.get(row.id).attempts == 0  # type: ignore[union-attr]
    restarted.tick(now=147.0)
    assert executor.launches == [1, 2]


class Unkillable(HalfPlaced):
    """Every gang runs and no kill ever takes: the executor sees it running for ever."""

    name = "unkillable"

    def status(self, job_dir: Path, generation: int, world: int) -> GangStatus:
        return GangStatus(world, world, {}, 0)


def test_an_orderly_stop_ends_even_where_a_killed_gang_is_never_seen_to_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A root server whose jobs could not reach their directories hung on SIGTERM for
    ever: it killed the gangs, then waited for ends it could never see."""
    import ringleader.runtime.control.controller as controlling

    monkeypatch.setattr(controlling, "KILLED_WAIT_S", 0.3)
    executor = Unkillable()
    store = Store(tmp_path / "db.sqlite")
    controller = Controller(store, executor, ControllerConfig(tmp_path, policy_named("fifo")))
    row = store.add(parse_spec({"name": "stuck", "command": "true", "gpus": 1}))
    controller.tick(now=100.0)
    assert store.get(row.id).state is State.RUNNING  # type: ignore[union-attr]
    assert controller.leave(wait_s=0.2) == 1
    assert executor.kills == [1]  # killed once, then left to the next server
