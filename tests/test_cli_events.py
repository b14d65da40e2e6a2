"""``ringleader show`` says a job's history in words, not in Python's reprs (issue 59)."""

from __future__ import annotations

from ringleader.cli.events import WHY, event_text, value_text, why_words
from ringleader.spine import reasons


def test_a_launch_is_a_sentence_with_its_devices_types_batch_and_cause() -> None:
    launched = {
        "t": 1.0,
        "kind": "launched",
        "generation": 3,
        "workers": 2,
        "devices": [["local", 0], ["local", 1]],
        "gpu_types": ["v100", "v100"],
        "counted": "resize",
        "batch": 174,
    }
    said = event_text(launched)
    assert said == "2 GPU(s) on local:0 (v100), local:1 (v100), batch 174 (resize)"
    assert "{" not in said and "[" not in said
    first = {"kind": "launched", "workers": 1, "devices": [["n0", 0]], "counted": "start"}
    assert event_text(first) == "1 GPU(s) on n0:0"


def test_other_events_read_as_key_value_with_json_values_and_nothing_raw() -> None:
    assert event_text({"kind": "stop_requested", "reason": "resize", "signal": True}) == (
        "for resize (by signal)"
    )
    said = event_text({"kind": "failed", "generation": 2, "codes": {"0": 1}, "reason": "x"})
    assert said == "x, rank 0 exit 1"
    assert event_text({"kind": "unknown", "generation": 2, "n": [1, 2]}) == "n=[1, 2]"
    hostile = event_text({"kind": "stopped", "reason": "\x1b[31mred\x1b[0m"})
    assert "\x1b" not in hostile and "red" in hostile
    assert value_text(None) == "–" and value_text(0.123456789) == "0.123457"


def test_stops_ends_and_restarts_say_why_and_where_not_key_value() -> None:
    stopped = {"kind": "stopped", "generation": 1, "reason": "resize", "step": 120}
    assert event_text(stopped) == "for resize, at step 120"
    assert event_text({"kind": "succeeded", "generation": 3, "step": 900}) == "at step 900"
    codes = {"10": 0, "2": 137, "0": 1}  # JSON's keys: text, in rank order
    failed = event_text({"kind": "failed", "codes": codes, "reason": "weights_not_finite"})
    assert failed == "weights not finite, rank 0 exit 1, rank 2 exit 137, rank 10 exit 0"
    again = event_text({"kind": "restarting", "codes": {"0": 1}, "attempt": 2})
    assert again == "rank 0 exit 1, attempt 2"
    assert event_text({"kind": "priority", "from": 0, "to": 5}) == "from 0 to 5"
    lingered = {"kind": "succeeded", "step": 9, "ended_ranks": [1], "warning": "w"}
    assert event_text(lingered) == "ranks 1 ended for lingering, at step 9"
    for said in (event_text(stopped), failed, again):
        assert "=" not in said and "generation" not in said


def test_every_reason_code_has_words_for_the_jobs_listing() -> None:
    codes = {v for k, v in vars(reasons).items() if k.isupper() and isinstance(v, str)}
    assert codes <= set(WHY), codes - set(WHY)
    assert why_words("behind_in_order") == "others first" and why_words(None) == ""
    assert why_words("new_code") == "new code"


def test_a_failed_jobs_why_is_the_last_line_its_ranks_wrote() -> None:
    from ringleader.runtime.state.wording import failure_line

    error = (
        "generation 3 failed: rank 0 exit 2\n[rank0] --- generation 3, rank 0/1 ---\n"
        "python3: can't open file '/home/a/train.py': [Errno 2] No such file or directory\n"
    )
    assert failure_line(error) == (
        "python3: can't open file '/home/a/train.py': [Errno 2] No such file or directory"
    )
    assert failure_line("generation 1 failed: rank 0 exit 1\n[rank0] ValueError: x") == (
        "ValueError: x"
    )
    diverged = "loss is nan at step 9 (failed at once)\ngeneration 2 failed: rank 0 exit 1"
    assert failure_line(diverged) == "loss is nan at step 9 (failed at once)"
    assert failure_line("generation 1 failed: rank 0 exit 1\n") == (
        "generation 1 failed: rank 0 exit 1"
    )
    assert failure_line(None) is None and failure_line("") is None
