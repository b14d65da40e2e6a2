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
    assert said == 'codes={"0": 1} reason=x'
    hostile = event_text({"kind": "stopped", "reason": "\x1b[31mred\x1b[0m"})
    assert "\x1b" not in hostile and "red" in hostile
    assert value_text(None) == "–" and value_text(0.123456789) == "0.123457"


def test_every_reason_code_has_words_for_the_jobs_listing() -> None:
    codes = {v for k, v in vars(reasons).items() if k.isupper() and isinstance(v, str)}
    assert codes <= set(WHY), codes - set(WHY)
    assert why_words("behind_in_order") == "others first" and why_words(None) == ""
    assert why_words("new_code") == "new code"
