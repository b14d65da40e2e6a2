"""The jobs database under damage: one bad row, a bad file, a bad state dir."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ringleader.runtime.state import presentation
from ringleader.runtime.state.errors import DamagedRow, StoreError
from ringleader.runtime.state.queries import PageQuery
from ringleader.runtime.state.rows import State
from ringleader.runtime.state.spec import parse_spec
from ringleader.runtime.state.store import Store
from tests.live_server import server_cli


def _store_with(tmp_path: Path, names: list[str]) -> tuple[Store, list[str]]:
    store = Store(tmp_path / "ringleader.db")
    ids = [store.add(parse_spec({"name": n, "command": ["true"]})).id for n in names]
    return store, ids


def _poke(db: Path, sql: str, *args: object) -> None:
    raw = sqlite3.connect(db)
    raw.execute(sql, args)
    raw.commit()
    raw.close()


@pytest.mark.parametrize(
    ("sql", "column"),
    [
        ("UPDATE jobs SET spec = '{not json' WHERE id = ?", "spec"),
        ("UPDATE jobs SET spec = json_set(spec, '$.gpus', 0) WHERE id = ?", "spec"),
        ("UPDATE jobs SET state = 'bogus' WHERE id = ?", "state"),
        ("UPDATE jobs SET step = 'many' WHERE id = ?", "step"),
        ("UPDATE jobs SET observations = '{\"2\": [1]}' WHERE id = ?", "observations"),
    ],
)
def test_one_damaged_row_is_named_and_skipped_and_the_rest_still_read(
    tmp_path: Path, sql: str, column: str
) -> None:
    store, (good, bad, other) = _store_with(tmp_path, ["good", "bad", "other"])
    _poke(store.path, sql, bad)
    assert [r.id for r in store.all()] == [good, other]
    assert store.damaged[bad].column == column
    with pytest.raises(DamagedRow, match=f"stored {column}"):
        store.get(bad)
    # Mended by hand, the job is back and no longer reported.
    raw = sqlite3.connect(store.path)
    spec, state, step, obs = raw.execute(
        "SELECT spec, state, step, observations FROM jobs WHERE id = ?", (good,)
    ).fetchone()
    raw.execute(
        "UPDATE jobs SET spec = ?, state = ?, step = ?, observations = ? WHERE id = ?",
        (spec.replace('"good"', '"bad"'), state, step, obs, bad),
    )
    raw.commit()
    raw.close()
    assert [r.id for r in store.all()] == [good, bad, other] and not store.damaged
    # The good rows still change and save.
    row = store.get(good)
    assert row is not None
    row.step = 7
    store.save(row, "launched")
    again = store.get(good)
    assert again is not None and again.step == 7
    store.close()


def test_a_damaged_event_detail_is_shown_not_raised(tmp_path: Path) -> None:
    store, (job,) = _store_with(tmp_path, ["x"])
    _poke(store.path, "UPDATE events SET detail = 'garbage' WHERE job_id = ?", job)
    assert store.events(job)[0]["damaged_detail"] == "garbage"
    store.close()


def test_files_that_are_no_database_of_ours_get_a_store_error(tmp_path: Path) -> None:
    noise = tmp_path / "noise.db"
    noise.write_bytes(b"\x13" * 5000)
    with pytest.raises(StoreError, match="not a usable ringleader database"):
        Store(noise)
    other = tmp_path / "other.db"
    _poke(other, "CREATE TABLE jobs (id TEXT PRIMARY KEY, colour TEXT)")
    with pytest.raises(StoreError, match="lacks column"):
        Store(other)
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    with pytest.raises(StoreError, match="cannot be a directory"):
        Store(a_file / "ringleader.db")


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ("round_s: abc\n", "round_s"),
        ("quantum_s: -1\n", "quantum_s"),
        ("round_s: 0\n", "round_s"),
        ("round_s: .nan\n", "round_s"),
        ("probe_window_s: true\n", "probe_window_s"),
        ("policy: best\n", "policy"),
        ("colour: red\n", "colour"),
        ("tiresias_thresholds_gpu_s: [10, 5]\n", "tiresias_thresholds_gpu_s"),
        ("policy: fifo\ntiresias_thresholds_gpu_s: [10]\n", "tiresias_thresholds_gpu_s"),
    ],
)
def test_server_config_gets_the_flags_checks(tmp_path: Path, config: str, field: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(config)
    out = server_cli("--config", str(path), "--state-dir", str(tmp_path / "state"))
    assert out.returncode == 2, out.stderr
    assert field in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (("--tiresias-thresholds", "1h"), "not comma-separated"),
        (("--tiresias-thresholds", "20,10"), "rising"),
        (("--policy", "fifo", "--tiresias-thresholds", "10"), "no attained-service queues"),
    ],
)
def test_server_queue_thresholds_are_checked_before_start(
    tmp_path: Path, flags: tuple[str, ...], says: str
) -> None:
    out = server_cli(*flags, "--state-dir", str(tmp_path / "state"))
    assert out.returncode == 2 and "--tiresias-thresholds" in out.stderr, out.stderr
    assert says in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "state" / "ringleader.db").exists()


def test_server_refuses_a_bad_state_dir_or_database_in_one_line(tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    out = server_cli("--state-dir", str(a_file))
    assert out.returncode == 2 and "--state-dir" in out.stderr, out.stderr
    state = tmp_path / "state"
    state.mkdir()
    (state / "ringleader.db").write_bytes(b"\x13" * 5000)
    out = server_cli("--state-dir", str(state))
    assert out.returncode == 2 and "move it aside" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


def test_a_second_server_on_the_same_state_dir_is_refused(tmp_path: Path) -> None:
    from ringleader.runtime.claims import claim_state_dir

    state = tmp_path / "state"
    held = claim_state_dir(state)
    try:
        out = server_cli("--state-dir", str(state), "--port", "1")
        assert out.returncode == 2, out.stderr
        assert "in use by another ringleader server" in out.stderr and "Traceback" not in out.stderr
    finally:
        held.close()
    claim_state_dir(state).close()  # free again once the holder lets go


def test_a_ray_address_where_nothing_listens_fails_in_one_line(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    out = server_cli("--executor", "ray", "--address", "127.0.0.1:1", "--state-dir", str(tmp_path))
    assert out.returncode == 2 and "nothing answers at 127.0.0.1:1" in out.stderr, out.stderr


def test_the_controller_reads_only_unfinished_jobs_and_damage_stays_reported(
    tmp_path: Path,
) -> None:
    store, (done, waiting, bad) = _store_with(tmp_path, ["done", "waiting", "bad"])
    row = store.get(done)
    assert row is not None
    row.state = State.SUCCEEDED
    store.save(row, "succeeded")
    _poke(store.path, "UPDATE jobs SET step = 'many' WHERE id = ?", bad)
    assert [r.id for r in store.unfinished()] == [waiting]
    assert [r.id for r in store.all()] == [done, waiting]
    assert set(store.damaged) == {bad}
    store.unfinished()  # a narrower read does not forget what a wider one found
    assert set(store.damaged) == {bad}
    store.close()


def test_a_queued_job_has_waited_since_its_submission(tmp_path: Path) -> None:
    """As in the simulator: time-slicing gives the next turn to the longest-waiting job."""
    store = Store(tmp_path / "ringleader.db")
    row = store.add(parse_spec({"name": "a", "command": ["true"]}), now=1234.5)
    assert row.state_since == 1234.5
    (again,) = store.unfinished()
    assert again.state_since == 1234.5


def test_a_damaged_row_is_listed_with_why_not_hidden(tmp_path: Path) -> None:
    store, (good, bad) = _store_with(tmp_path, ["good", "bad"])
    _poke(store.path, "UPDATE jobs SET step = 'many' WHERE id = ?", bad)
    listed = store.listing()
    assert [getattr(r, "id", None) or getattr(r, "job_id", None) for r in listed] == [good, bad]
    shown = presentation.public(listed[1])
    assert shown["state"] == "damaged" and "stored step" in shown["error"]
    assert set(shown) == set(
        presentation.public(listed[0])
    )  # same keys: clients need no special case
    store.close()


def test_pages_follow_a_cursor_filter_and_keep_damaged_rows(tmp_path: Path) -> None:
    store, ids = _store_with(tmp_path, [f"j{i}" for i in range(7)])
    _poke(store.path, "UPDATE jobs SET step = 'many' WHERE id = ?", ids[3])
    seen, cursor = [], None
    while True:  # pages of 3 in submission order: 3 + 3 + 1, the damaged row among them
        rows, cursor = store.page(PageQuery(limit=3, cursor=cursor))
        seen.append([presentation.summary(r)["id"] for r in rows])
        if cursor is None:
            break
    assert seen == [ids[:3], ids[3:6], ids[6:]]
    assert store.page(PageQuery(limit=3, cursor=10**6)) == ([], None)  # past the last job
    newest, after = store.page(PageQuery(limit=2, newest_first=True))
    assert [presentation.summary(r)["id"] for r in newest] == [ids[6], ids[5]] and after is not None
    older, _ = store.page(PageQuery(limit=2, cursor=after, newest_first=True))
    assert [presentation.summary(r)["id"] for r in older] == [ids[4], ids[3]]
    row = store.get(ids[0])
    assert row is not None
    row.state = State.RUNNING
    store.save(row)
    running, _ = store.page(PageQuery(states=("running",)))
    assert [presentation.summary(r)["id"] for r in running] == [ids[0]]
    assert store.page(PageQuery(user="nobody"))[0] == []
    assert len(store.page(PageQuery(user="anonymous"))[0]) == 7  # the damaged row too
    store.close()


def test_a_spec_that_is_not_json_never_breaks_an_owners_query(tmp_path: Path) -> None:
    # SQLite's json_extract raises on malformed JSON: one damaged row must not turn
    # every user's listing, prefix lookup or the metrics' counts into an error.
    store, ids = _store_with(tmp_path, ["a", "b"])
    _poke(store.path, "UPDATE jobs SET spec = '{not json' WHERE id = ?", ids[0])
    rows, _ = store.page(PageQuery(user="anonymous"))
    assert [r.id for r in rows if not isinstance(r, DamagedRow)] == [ids[1]]
    assert store.ids_starting(ids[1][:3], owner="anonymous") == [ids[1]]
    assert store.ids_starting(ids[0], owner="anonymous") == []
    assert store.counts() == {("queued", "anonymous"): 1, ("queued", "?"): 1}


def test_saving_progress_writes_progress_and_leaves_what_others_own(tmp_path: Path) -> None:
    """The controller saves progress every look; a cancel or a priority the API
    wrote meanwhile, and the job's state, stay as they are in the database."""
    store, (job,) = _store_with(tmp_path, ["p"])
    seen = store.get(job)
    assert seen is not None
    assert store.request_cancel(job) is not None  # the API, after the controller's read
    seen.step, seen.epoch, seen.loss, seen.attained_gpu_s = 7, 0.5, 1.25, 42.0
    seen.shape["batch_per_worker"] = 32.0
    seen.observations["2"] = [0.1, 5.0, 50.0, 32.0]
    seen.progress_offset, seen.state = 900, State.SUCCEEDED  # state: not progress
    store.save_progress(seen)
    after = store.get(job)
    assert after is not None
    assert (after.step, after.epoch, after.loss, after.attained_gpu_s) == (7, 0.5, 1.25, 42.0)
    assert after.shape == {"batch_per_worker": 32.0}
    assert after.observations == {"2": [0.1, 5.0, 50.0, 32.0]}
    assert after.progress_offset == 900
    assert after.cancel_requested
    assert after.state is State.QUEUED


def test_a_stored_spec_is_validated_once_and_a_changed_one_again(tmp_path: Path) -> None:
    store, (job,) = _store_with(tmp_path, ["s"])
    first, again = store.get(job), store.get(job)
    assert first is not None and again is not None
    assert first.spec is again.spec  # the same text: validated once
    changed = store.set_priority(job, 5)
    assert changed is not None and changed.spec.priority == 5
    later = store.get(job)
    assert later is not None and later.spec.priority == 5


def test_a_row_read_again_unchanged_is_a_fresh_copy_and_a_changed_one_is_read_anew(
    tmp_path: Path,
) -> None:
    """Unchanged rows are copied from the last parse: changing one that was read,
    without saving it, must not change what the next read returns."""
    store, (job,) = _store_with(tmp_path, ["c"])
    first = store.get(job)
    assert first is not None
    first.shape["x"] = 1.0
    first.observations["1"] = [0.1, 1.0, 10.0, 8.0]
    first.devices.append(("local", 0))
    first.counts["start"] = 1
    first.step = 99
    again = store.get(job)
    assert again is not None and again is not first
    assert (again.shape, again.observations, again.devices, again.counts, again.step) == (
        {},
        {},
        [],
        {},
        0,
    )
    again.observations["1"] = [0.2, 2.0, 20.0, 8.0]
    store.save_progress(again)
    later = store.get(job)
    assert later is not None and later.observations == {"1": [0.2, 2.0, 20.0, 8.0]}
    later.observations["1"][0] = 5.0  # in place, in a list inside the copy
    assert (store.get(job) or later).observations["1"][0] == 0.2
