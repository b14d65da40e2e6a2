"""A rank that stays once its job's work is done: ended when idle, left alone while it computes."""

from __future__ import annotations

import time
from pathlib import Path

from ringleader.runtime.control.lingering import BUSY_FRACTION
from ringleader.runtime.state.rows import State
from ringleader.runtime.state.spec import parse_spec
from ringleader.runtime.state.store import Store
from ringleader.runtime.workers.executor.local import LocalExecutor
from tests.test_controller_settle import _controller, _until, rig  # noqa: F401 - the fixture

HANGS_AFTER_RANK_0 = (
    "import os, threading\n"
    "if os.environ['RANK'] == '1':\n"
    "    threading.Event().wait()  # done, and never exits: asleep, as a deadlock is\n"
)
COMPUTES_AFTER_RANK_0 = (
    "import os, time\n"
    "if os.environ['RANK'] == '1':\n"
    "    end = time.monotonic() + 6\n"
    "    while time.monotonic() < end:  # a last evaluation: busy, then done\n"
    "        sum(range(10_000))\n"
)


def test_a_rank_idle_after_its_peers_exited_0_is_ended_and_the_job_succeeds_with_a_warning(
    rig: tuple[Store, LocalExecutor, Path],  # noqa: F811 - the fixture, imported
) -> None:
    store, executor, state = rig
    controller = _controller(store, executor, state, exit_grace_s=2.0)
    spec = {"name": "hangs", "command": ["python", "-c", HANGS_AFTER_RANK_0], "gpus": 2}
    job = store.add(parse_spec(spec))
    started = time.monotonic()
    done = _until(controller, store, job.id, lambda r: r.state.finished, 60)
    assert done.state is State.SUCCEEDED
    assert time.monotonic() - started < 30  # the grace, not a timeout of ours
    ended = [e for e in store.events(job.id) if e["kind"] == "succeeded"]
    assert [e["ended_ranks"] for e in ended] == [[1]]
    assert "rank 1 did not exit 2 s after" in ended[0]["warning"]
    status = executor.status(state / "jobs" / job.id, done.generation, 2)
    assert status.alive == 0 and status.exits.get(0) == 0 and status.exits.get(1) != 0


def test_a_rank_still_computing_after_its_peers_exited_is_left_to_finish(
    rig: tuple[Store, LocalExecutor, Path],  # noqa: F811 - the fixture, imported
) -> None:
    assert BUSY_FRACTION < 0.5  # the busy rank uses a whole core
    store, executor, state = rig
    controller = _controller(store, executor, state, exit_grace_s=1.5)
    spec = {"name": "evaluates", "command": ["python", "-c", COMPUTES_AFTER_RANK_0], "gpus": 2}
    job = store.add(parse_spec(spec))
    done = _until(controller, store, job.id, lambda r: r.state.finished, 60)
    assert done.state is State.SUCCEEDED
    ended = [e for e in store.events(job.id) if e["kind"] == "succeeded"]
    assert len(ended) == 1 and "warning" not in ended[0]
    status = executor.status(state / "jobs" / job.id, done.generation, 2)
    assert status.exits == {0: 0, 1: 0}


def test_what_a_rank_left_running_in_its_process_group_ends_with_the_job(
    rig: tuple[Store, LocalExecutor, Path],  # noqa: F811 - the fixture, imported
) -> None:
    store, executor, state = rig
    controller = _controller(store, executor, state)
    leaves = (
        "import subprocess\n"
        "child = subprocess.Popen(['sleep', '300'])\n"
        "open('child.pid', 'w').write(str(child.pid))\n"
    )
    job = store.add(parse_spec({"name": "leaves", "command": ["python", "-c", leaves]}))
    done = _until(controller, store, job.id, lambda r: r.state.finished, 60)
    assert done.state is State.SUCCEEDED
    child = int((state / "jobs" / job.id / "child.pid").read_text())
    deadline = time.monotonic() + 5
    while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{child}").exists() or "Z" in _state(child)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"
