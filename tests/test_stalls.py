"""A rank that hangs mid-run (issue 60, item 3): the job restarts from its checkpoint.

Real ranks on the local executor (``tests/data/hangs_mid_run.py``): rank 1
stops for ever at a step, rank 0 waits in the next all-reduce, nothing
exits. With ``stall_s`` stated, the controller ends the gang once no step
has come for that long and relaunches the job from its last checkpoint; a
second stall with no step since the first is charged to its retries.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from ringleader.runtime.control import stalls
from ringleader.runtime.control.gangs import Gang
from ringleader.runtime.control.progress import LIBRARY_GENERATION
from ringleader.runtime.state.rows import State
from ringleader.runtime.state.spec import parse_spec
from ringleader.runtime.state.store import Store
from ringleader.runtime.workers.executor.local import LocalExecutor
from tests.test_controller_settle import _controller, _until, rig  # noqa: F401 - the fixture

TRAINER = Path(__file__).parent / "data" / "hangs_mid_run.py"


def _spec(hanging: int, **more: object) -> dict[str, object]:
    command = [sys.executable, str(TRAINER), "60", "25", str(hanging)]
    return {"name": "stalls", "command": command, "gpus": 2, "stall_s": 3, **more}


def test_a_gang_with_a_hung_rank_restarts_from_its_checkpoint_and_finishes(
    rig: tuple[Store, LocalExecutor, Path],  # noqa: F811 - the fixture, imported
) -> None:
    store, executor, state = rig
    controller = _controller(store, executor, state)
    job = store.add(parse_spec(_spec(hanging=1, retries=0)))
    started = time.monotonic()
    done = _until(controller, store, job.id, lambda r: r.state.finished, 120)
    events = store.events(job.id)
    assert done.state is State.SUCCEEDED, (events, done.error)
    stopped = [e for e in events if e["kind"] == "stopped"]
    assert [e["reason"] for e in stopped] == ["stalled"]
    assert 25 <= stopped[0]["step"] < 60  # where it hung, not from the start
    assert [e["kind"] for e in events].count("launched") == 2
    assert done.attempts == 0  # a first stall is not the job's failure
    assert time.monotonic() - started < 90


def test_a_job_that_stalls_again_without_a_step_between_is_charged_for_it(
    rig: tuple[Store, LocalExecutor, Path],  # noqa: F811 - the fixture, imported
) -> None:
    store, executor, state = rig
    # Restored at its checkpoint, the second generation may hang before its first
    # step: then the start's allowance (the launch timeout) is what ends it.
    controller = _controller(store, executor, state, launch_timeout_s=15)
    job = store.add(parse_spec(_spec(hanging=99, retries=0)))
    done = _until(controller, store, job.id, lambda r: r.state.finished, 120)
    events = store.events(job.id)
    assert done.state is State.FAILED, events
    kinds = [e["kind"] for e in events]
    assert kinds.count("launched") == 2 and kinds[-1] == "failed"
    assert events[-1]["reason"] == "stalled"
    for generation in (1, 2):  # no rank of either generation outlives it
        status = executor.status(state / "jobs" / job.id, generation, 2)
        assert status.alive == 0


def test_the_stall_clock_counts_a_restored_generations_steps_not_the_jobs_highest(
    rig: tuple[Store, LocalExecutor, Path],  # noqa: F811 - the fixture, imported
) -> None:
    store, _, _ = rig
    row = store.add(parse_spec(_spec(hanging=1)))
    row.state, row.generation, row.step = State.RUNNING, 2, 25
    row.shape[LIBRARY_GENERATION] = 2
    gang = Gang()
    assert not stalls.stalled(row, gang, 0, 100.0, startup_s=120)
    assert not stalls.stalled(row, gang, 0, 110.0, startup_s=120)  # starting: 120 s
    assert stalls.stalled(row, gang, 0, 220.0, startup_s=120)  # a start that hangs
    for seen, now in ((1, 221.0), (2, 223.5), (3, 226.0)):  # retaking steps 23..25
        assert not stalls.stalled(row, gang, seen, now, startup_s=120)
    assert row.step == 25
    assert stalls.stalled(row, gang, 3, 229.0, startup_s=120)  # 3 s with no step
