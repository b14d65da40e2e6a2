"""Job library pieces that need no scheduler: checkpoints and learning rates."""

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from ringleader.job import CheckpointStore, CorruptCheckpoint, LearningRateSchedule  # noqa: E402


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
