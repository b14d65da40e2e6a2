"""Every checkpoint damaged: the job fails and says so, unless its spec says restart.

Starting over from step 0 without a word would throw the training away, and
the new checkpoints would prune the damaged ones for good (issue 14, item 6).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ringleader.job.checkpoint import (
    MAGIC,
    ON_BAD_CHECKPOINT_ENV,
    CheckpointsDamaged,
    CheckpointStore,
)
from ringleader.job.records import progress_record
from ringleader.runtime.state.spec import SpecError, parse_spec
from tests.live_server import LiveServer, rank0_worker_pid, serving, tiny_job, wait_for

torch = pytest.importorskip("torch")


def _state(step: int) -> dict[str, object]:
    return {"step": step, "weight": torch.full((4,), float(step))}


def _damage(path: Path) -> None:
    """Garbage over the payload, the header left whole: a checksum mismatch, as bit rot makes."""
    blob = path.read_bytes()
    head = len(MAGIC) + 32
    path.write_bytes(blob[:head] + b"\xde\xad\xbe\xef" * ((len(blob) - head) // 4 + 1))


def _two_damaged(directory: Path) -> CheckpointStore:
    store = CheckpointStore(directory)
    for step in (10, 20):
        _damage(store.save(step, _state(step)))
    return store


def test_every_checkpoint_damaged_fails_the_restore_naming_how_many_and_why(
    tmp_path: Path,
) -> None:
    store = _two_damaged(tmp_path)
    seen: list[Path] = []
    with pytest.raises(CheckpointsDamaged, match="all 2 checkpoint") as caught:
        store.restore(on_skip=lambda path, why: seen.append(path))
    assert caught.value.count == 2 and caught.value.directory == tmp_path
    assert "checksum mismatch" in caught.value.first_reason
    assert seen == [store.path_for(20), store.path_for(10)]  # each still reported
    assert store.steps() == [10, 20]  # nothing removed: a person decides


def test_restart_starts_fresh_and_sets_the_damaged_aside_at_the_first_save(
    tmp_path: Path,
) -> None:
    store = _two_damaged(tmp_path)
    assert store.restore(on_all_damaged="restart") is None
    assert store.steps() == [10, 20]  # still there while other ranks may be reading
    store.save(1, _state(1))
    store.save(2, _state(2))
    # Left in place, steps 10 and 20 would outrank the new checkpoints and prune them.
    assert store.steps() == [1, 2]
    assert sorted(p.name for p in tmp_path.glob("*.damaged")) == [
        "ckpt-000000000010.rlck.damaged",
        "ckpt-000000000020.rlck.damaged",
    ]
    restored = store.restore()
    assert restored is not None and restored.step == 2


def test_one_intact_checkpoint_is_still_restored_past_a_damaged_newer_one(
    tmp_path: Path,
) -> None:
    store = CheckpointStore(tmp_path)
    store.save(10, _state(10))
    _damage(store.save(20, _state(20)))
    restored = store.restore()
    assert restored is not None and restored.step == 10
    assert restored.skipped == (store.path_for(20),)


def test_the_spec_field_defaults_to_fail_and_takes_only_fail_or_restart() -> None:
    spec = {"name": "x", "command": "true"}
    assert parse_spec(spec).on_bad_checkpoint == "fail"
    assert parse_spec(spec | {"on_bad_checkpoint": "restart"}).on_bad_checkpoint == "restart"
    with pytest.raises(SpecError, match="on_bad_checkpoint"):
        parse_spec(spec | {"on_bad_checkpoint": "sometimes"})


def test_the_event_is_one_the_scheduler_reads() -> None:
    line = '{"event":"checkpoints_damaged","g":2,"path":"/j/checkpoints","why":"x","t":1.0}'
    assert progress_record(line) == {
        "event": "checkpoints_damaged",
        "g": 2,
        "path": "/j/checkpoints",
        "why": "x",
        "t": 1.0,
    }


ELASTIC_SCRIPT = """
import torch
from ringleader import elastic

data = [(torch.randn(4), torch.randn(2)) for _ in range(32)]
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = elastic.DataLoader(data, batch_size=4)
model = elastic.prepare(model, optimizer, lr_rule="none")
for epoch in elastic.epochs(2):
    for x, y in loader:
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
print("trained to the end")
"""


def _resume_elastic(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The script resumed as torchrun resumes it, over a directory of damaged checkpoints."""
    script = tmp_path / "train.py"
    script.write_text(ELASTIC_SCRIPT)
    base = {k: v for k, v in os.environ.items() if not k.startswith("RINGLEADER_")}
    base |= {"TORCHELASTIC_RESTART_COUNT": "1", "RINGLEADER_CHECKPOINT_DIR": str(tmp_path)}
    return subprocess.run(
        [sys.executable, str(script)],
        env=base | env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _events(job_dir: Path) -> list[dict[str, object]]:
    lines = (job_dir / "progress.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if "event" in r]


def test_the_light_api_exits_non_zero_saying_every_checkpoint_is_damaged(tmp_path: Path) -> None:
    _two_damaged(tmp_path / "checkpoints")
    out = _resume_elastic(tmp_path)
    assert out.returncode != 0
    assert "trained to the end" not in out.stdout
    said = [line for line in out.stderr.splitlines() if "is damaged" in line]
    assert len(said) == 1, out.stderr
    assert f"every checkpoint in {tmp_path / 'checkpoints'} is damaged" in said[0]
    assert "on_bad_checkpoint: restart" in said[0] and "step 0" in said[0]
    damaged = [e for e in _events(tmp_path) if e["event"] == "checkpoints_damaged"]
    assert len(damaged) == 1 and "checksum mismatch" in str(damaged[0]["why"])
    assert not any(e["event"] == "started" for e in _events(tmp_path))


def test_the_light_api_told_to_restart_trains_from_step_0(tmp_path: Path) -> None:
    _two_damaged(tmp_path / "checkpoints")
    out = _resume_elastic(tmp_path, **{ON_BAD_CHECKPOINT_ENV: "restart"})
    assert out.returncode == 0, out.stderr
    assert "trained to the end" in out.stdout
    assert "STARTING OVER FROM STEP 0" in out.stderr
    started = [e for e in _events(tmp_path) if e["event"] == "started"]
    assert started and started[0]["restored_step"] is None
    assert len(list((tmp_path / "checkpoints").glob("*.rlck.damaged"))) == 2


# -- through the real server ---------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    yield from serving(tmp_path_factory.mktemp("server"))


def _crash_with_every_checkpoint_damaged(server: LiveServer, job_id: str) -> None:
    """Freeze the worker once it has checkpointed, damage every checkpoint, kill it.

    Frozen first, so it writes no intact checkpoint between the damage and
    the kill; the controller then relaunches it from its checkpoints.
    """
    checkpoints = server.state_dir / "jobs" / job_id / "checkpoints"
    wait_for(
        lambda: server.job(job_id)["step"] > 20 and any(checkpoints.glob("ckpt-*.rlck")),
        90,
        f"{job_id}: progress and a checkpoint",
    )
    found: list[int] = []

    def running_worker() -> bool:
        # The newest generation's worker, once its wrapper has one: a job resized as
        # the other job arrives is between generations for a moment.
        generation = server.job(job_id)["events"][-1]["generation"]
        try:
            found.append(rank0_worker_pid(server.state_dir, job_id, generation))
        except (IndexError, OSError, ValueError):
            return False
        return True

    wait_for(running_worker, 60, f"{job_id}: a running rank 0 worker")
    worker = found[-1]
    os.kill(worker, signal.SIGSTOP)
    try:
        files = list(checkpoints.glob("ckpt-*.rlck"))
        assert files
        for path in files:
            _damage(path)
    finally:
        os.kill(worker, signal.SIGKILL)


@pytest.mark.slow
def test_a_job_whose_checkpoints_are_all_damaged_fails_unless_its_spec_says_restart(
    server: LiveServer,
) -> None:
    failing = server.submit(tiny_job("damaged", epochs=20, ckpt=0.5))
    restarting = server.submit(
        tiny_job("restarts", epochs=20, ckpt=0.5, on_bad_checkpoint="restart")
    )
    for job_id in (failing, restarting):
        _crash_with_every_checkpoint_damaged(server, job_id)

    failed = server.wait_state(failing, {"succeeded", "failed"}, 240)
    assert failed["state"] == "failed", failed
    first_line = failed["error"].splitlines()[0]
    checkpoints = server.state_dir / "jobs" / failing / "checkpoints"
    assert f"every checkpoint in {checkpoints} is damaged" in first_line
    assert "checksum mismatch" in first_line and "on_bad_checkpoint: restart" in first_line
    assert failed["attempts"] == 2  # the kill, then the damage: no retry after it
    events = [r.get("event") for r in server.progress(failing)]
    assert "checkpoints_damaged" in events

    done = server.wait_state(restarting, {"succeeded", "failed"}, 240)
    assert done["state"] == "succeeded", done["error"]
    assert done["attempts"] == 1
    starts = [r for r in server.progress(restarting) if r.get("event") == "started"]
    assert len(starts) == 2 and starts[1]["restored_step"] is None  # it started over
    kept = server.state_dir / "jobs" / restarting / "checkpoints"
    assert list(kept.glob("*.rlck.damaged"))
