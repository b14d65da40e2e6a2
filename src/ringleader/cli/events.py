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


def devices_text(devices: object, types: object) -> str:
    """``local-v100:0 (v100), ...``: each device (``"node:i"`` or ``[node, i]``) with its
    GPU type, where every device has one."""
    if not isinstance(devices, list):
        return shown(devices)
    names = [":".join(map(str, d)) if isinstance(d, list) else str(d) for d in devices]
    if not isinstance(types, list) or len(types) != len(names):
        types = [""] * len(names)
    return shown(", ".join(f"{n} ({t})" if t else n for n, t in zip(names, types, strict=True)))


def event_text(event: dict[str, Any]) -> str:
    """What one event says, after its time and kind: ``2 GPU(s) on local:0, local:1,
    batch 64 (resize)``, ``for resize``, ``step 120``; the rest as ``key=value``."""
    kind = event.get("kind")
    detail = {k: v for k, v in event.items() if k not in ("t", "kind", "warning")}
    parts: list[str] = []
    if kind == "launched":
        workers = detail.pop("workers", "?")
        on = devices_text(detail.pop("devices", None) or [], detail.pop("gpu_types", None))
        said = f"{value_text(workers)} GPU(s) on {on}"
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
