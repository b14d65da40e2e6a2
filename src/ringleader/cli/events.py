"""A job's events and fields as a person reads them, not as Python prints them.

``ringleader show`` printed ``launched {'generation': 1, 'devices': [['local',
0], ...]}`` and ``loss: None`` (issue 59): here an event is a sentence of its
own kind, as the dashboard's history says it, and a missing value is a dash.
"""

from __future__ import annotations

import json
from typing import Any

from ringleader.cli.terminal import shown

MISSING = "–"
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
    if value is None:
        return MISSING
    if isinstance(value, float):
        return f"{value:.6g}"
    return shown(value)


def _devices(detail: dict[str, Any]) -> str:
    devices = detail.get("devices") or []
    types = detail.get("gpu_types") or []
    if not isinstance(devices, list):
        return shown(devices)
    names = []
    for i, d in enumerate(devices):
        name = ":".join(map(str, d)) if isinstance(d, list) else str(d)
        kind = types[i] if isinstance(types, list) and i < len(types) else ""
        names.append(f"{name} ({kind})" if kind else name)
    return shown(", ".join(names))


def event_text(event: dict[str, Any]) -> str:
    """What one event says, after its time and kind: ``2 GPU(s) on local:0, local:1,
    batch 64 (resize)``, ``for resize``, ``step 120``; the rest as ``key=value``."""
    kind = event.get("kind")
    detail = {k: v for k, v in event.items() if k not in ("t", "kind", "warning")}
    parts: list[str] = []
    if kind == "launched":
        workers = detail.pop("workers", "?")
        said = f"{value_text(workers)} GPU(s) on {_devices(detail)}"
        detail.pop("devices", None)
        detail.pop("gpu_types", None)
        if "batch" in detail:
            said += f", batch {value_text(detail.pop('batch'))}"
        counted = detail.pop("counted", None)
        if counted not in (None, "start"):
            said += f" ({value_text(counted)})"
        parts.append(said)
    elif kind == "stop_requested" and "reason" in detail:
        signal = " (by signal)" if detail.pop("signal", False) else ""
        parts.append(f"for {value_text(detail.pop('reason'))}{signal}")
    detail.pop("generation", None)  # said by the history's order; the API keeps it
    for key, value in detail.items():
        text = value if isinstance(value, str) else json.dumps(value, separators=(", ", ": "))
        parts.append(f"{shown(key)}={shown(text)}")
    return " ".join(parts)
