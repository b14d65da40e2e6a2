"""Job library pieces that need no scheduler: checkpoints and learning rates."""

import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from ringleader.job import CheckpointStore, CorruptCheckpoint, LearningRateSchedule  # noqa: E402
from tests.live_server import wait_for  # noqa: E402


def _state(step: int) -> dict[str, object]:
    model = torch.nn.Linear(4, 2)
    torch.manual_seed(step)
    torch.nn.init.normal_(model.weight)
    return {"step": step, "model": model.state_dict(), "epoch": step / 10}


def test_round_trip_and_newest_wins(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path)
    for step in (10, 20):
        store.save(step, _state(step))
    restored = store.restore()
    assert restored is not None and restored.step == 20 and not restored.skipped
    assert torch.equal(restored.state["model"]["weight"], _state(20)["model"]["weight"])  # type: ignore[index]


def test_only_keep_newest_files_remain(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path, keep=3)
    for step in range(0, 60, 10):
        store.save(step, _state(step))
    assert store.steps() == [30, 40, 50]
    assert not list(tmp_path.glob(".ckpt-*"))  # no temporary files left


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty"])
def test_a_damaged_newest_checkpoint_falls_back_to_the_previous(
    tmp_path: Path, damage: str
) -> None:
    store = CheckpointStore(tmp_path)
    store.save(1, _state(1))
    newest = store.save(2, _state(2))
    blob = newest.read_bytes()
    if damage == "truncate":
        newest.write_bytes(blob[: len(blob) // 2])
    elif damage == "flip":
        newest.write_bytes(blob[:-10] + bytes([blob[-10] ^ 0xFF]) + blob[-9:])
    else:
        newest.write_bytes(b"")
    seen: list[str] = []
    restored = store.restore(on_skip=lambda p, why: seen.append(why))
    assert restored is not None and restored.step == 1
    assert restored.skipped == (newest,)
    assert seen and str(newest) in seen[0]
    with pytest.raises(CorruptCheckpoint):
        store.read(newest)


def test_nothing_to_restore(tmp_path: Path) -> None:
    assert CheckpointStore(tmp_path / "absent").restore() is None


def test_keep_must_leave_a_fallback(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="fallback"):
        CheckpointStore(tmp_path, keep=1)


def test_linear_scaling_with_epoch_based_decay() -> None:
    lr = LearningRateSchedule(0.1, decay_epochs=(100, 150))
    assert lr.at(1, 0) == pytest.approx(0.1)
    assert lr.at(4, 51) == pytest.approx(0.4)  # the seed: 0.4 on 4 GPUs
    assert lr.at(8, 51) == pytest.approx(0.8)  # and 0.8 on 8
    assert lr.at(8, 100) == pytest.approx(0.08)  # decay at a fixed epoch, any size
    assert lr.at(2, 160) == pytest.approx(0.002)


def test_learning_rate_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        LearningRateSchedule(0.1, decay_epochs=(150, 100))
    with pytest.raises(ValueError):
        LearningRateSchedule(0.1).at(0, 1)


def _progress(job_dir: Path) -> list[dict[str, object]]:
    import json

    path = job_dir / "progress.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _last_step(job_dir: Path) -> int:
    steps = [int(str(r["step"])) for r in _progress(job_dir) if "loss" in r]
    return steps[-1] if steps else 0


def test_a_running_job_suspends_resumes_checkpoints_and_stops_on_request(tmp_path: Path) -> None:
    """A real training process obeying the control file at minibatch boundaries."""
    import os
    import subprocess
    import sys

    from ringleader.job.control import Action, Control, write_control

    write_control(tmp_path, Control(1, Action.RUN))
    env = {**os.environ, "RINGLEADER_JOB_DIR": str(tmp_path), "RINGLEADER_GENERATION": "1"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ringleader.workloads.resnet",
            "--depth",
            "8",
            "--image-size",
            "8",
            "--batch",
            "8",
            "--epochs",
            "1000",
            "--checkpoint-every-s",
            "1e9",
        ],
        env=env,
    )
    try:
        wait_for(lambda: _last_step(tmp_path) >= 3, 60, "training to start")
        write_control(tmp_path, Control(1, Action.SUSPEND))
        # At the next minibatch boundary, which may be a whole step away on a busy machine.
        wait_for(
            lambda: any(r.get("event") == "suspended" for r in _progress(tmp_path)),
            60,
            "the job to say it is suspended",
        )
        paused_at = _last_step(tmp_path)
        time.sleep(1.0)
        assert _last_step(tmp_path) == paused_at  # no minibatch while suspended
        assert proc.poll() is None
        write_control(tmp_path, Control(1, Action.RUN))
        wait_for(lambda: _last_step(tmp_path) > paused_at + 3, 60, "training to resume")
        assert not list((tmp_path / "checkpoints").glob("ckpt-*"))
        write_control(tmp_path, Control(1, Action.RUN, checkpoint=1))
        checkpoints = tmp_path / "checkpoints"
        wait_for(lambda: any(checkpoints.glob("ckpt-*")), 60, "a requested checkpoint")
        assert proc.poll() is None  # a checkpoint does not stop the job
        write_control(tmp_path, Control(1, Action.STOP))
        assert proc.wait(timeout=60) == 0
        events = [r["event"] for r in _progress(tmp_path) if "event" in r]
        assert events == ["attached", "started", "suspended", "resumed", "checkpointed", "stopped"]
        stopped = next(r for r in _progress(tmp_path) if r.get("event") == "stopped")
        newest = CheckpointStore(tmp_path / "checkpoints").restore()
        assert newest is not None and newest.step == stopped["step"] == _last_step(tmp_path)
    finally:
        proc.kill()


def test_checkpoints_that_cannot_be_read_fail_the_attempt_instead_of_starting_over(
    tmp_path: Path,
) -> None:
    from ringleader.job.checkpoint import CheckpointsUnreadable

    store = CheckpointStore(tmp_path)
    store.path_for(40).mkdir(parents=True)  # reading it is an OSError, as EIO would be
    with pytest.raises(CheckpointsUnreadable, match="not starting over"):
        store.restore()


def test_a_suspended_rank_runs_through_sigtstp_and_takes_a_resume_sent_meanwhile(
    tmp_path: Path,
) -> None:
    """Slurm's suspend sends SIGTSTP a second before SIGSTOP: a rank stopped by it
    would wait out that second before it could hear a resume."""
    import os
    import signal
    import subprocess
    import sys

    from ringleader.job.control import Action, Control, write_control

    write_control(tmp_path, Control(1, Action.RUN))
    env = {**os.environ, "RINGLEADER_JOB_DIR": str(tmp_path), "RINGLEADER_GENERATION": "1"}
    argv = [sys.executable, "-m", "ringleader.workloads.resnet", "--depth", "8"]
    argv += ["--image-size", "8", "--batch", "8", "--epochs", "1000"]
    proc = subprocess.Popen([*argv, "--checkpoint-every-s", "1e9"], env=env)
    try:
        wait_for(lambda: _last_step(tmp_path) >= 2, 60, "training to start")
        proc.send_signal(signal.SIGTSTP)  # before any suspend: the default, it stops
        wait_for(lambda: _proc_state(proc.pid) == "T", 60, "SIGTSTP to stop the running rank")
        proc.send_signal(signal.SIGCONT)
        write_control(tmp_path, Control(1, Action.SUSPEND))
        wait_for(
            lambda: any(r.get("event") == "suspended" for r in _progress(tmp_path)), 60, "suspend"
        )
        proc.send_signal(signal.SIGTSTP)
        time.sleep(0.3)
        assert _proc_state(proc.pid) != "T"
        write_control(tmp_path, Control(1, Action.RUN))
        wait_for(lambda: any(r.get("event") == "resumed" for r in _progress(tmp_path)), 5, "resume")
        proc.send_signal(signal.SIGTSTP)  # and on after the resume
        paused_at = _last_step(tmp_path)
        wait_for(lambda: _last_step(tmp_path) > paused_at + 2, 60, "training to go on")
    finally:
        proc.kill()
        proc.wait()


def _proc_state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
