"""A job's events and fields as a person reads them, not as Python prints them.

``ringleader show`` printed ``launched {'generation': 1, 'devices': [['local',
0], ...]}`` and ``loss: None`` (issue 59): here an event is a sentence of its
own kind, as the dashboard's history says it, and a missing value is a dash.
"""

from __future__ import annotations

from typing import Any

from ringleader.cli.terminal import shown
from ringleader.runtime.state import wording

MISSING = wording.MISSING
WHY = {
    "over_quota": "over quota",
    "no_free_gpus": "no free GPUs",
    "time_sliced_out": "time-sliced out",
    "behind_in_order": "others first",
    "runs_smaller": "runs smaller",
    "sized_by_gain": "sized by gain",
    "fixed_size": "its own size",
    "profiling": "profiling",
    "grown_idle": "grown onto idle",
    "disk_full": "disk full",
}
"""A few words for each reason code (``spine.reasons``), for a listing's narrow column;
``ringleader show`` gives the whole sentence."""


def why_words(code: object) -> str:
    """A reason code in words (an unknown one with its underscores as spaces)."""
    if not isinstance(code, str) or not code:
        return ""
    return WHY.get(code, shown(code).replace("_", " "))


def value_text(value: object) -> str:
    """A field's value: a dash for none, numbers as they are, text escaped."""
    return shown(wording.value_text(value))


def devices_text(devices: object, types: object) -> str:
    """``local-v100:0 (v100), ...``: each device with its GPU type, escaped."""
    return shown(wording.devices_text(devices, types))


def event_text(event: dict[str, Any]) -> str:
    """What one event says, after its time and kind (``runtime.state.wording``, which
    the dashboard's history says too), escaped for a terminal."""
    return shown(wording.event_words(event))
