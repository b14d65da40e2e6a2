"""A job's events as a person reads them: one sentence per kind, for the CLI and the dashboard.

The store keeps each event as a kind and a detail dict (``launched`` with
``workers``, ``devices``, ``counted``...), which is what a script wants. A
person reading ``ringleader show`` or the dashboard's history wants
``2 GPU(s) on n0:0, n0:1, batch 64 (resize)`` and ``for resize, at step 120``,
not ``generation=1 reason="resize"`` (issue 59). Both say it with this module,
so the two never drift apart. The text is plain: a terminal escapes it
(``cli.terminal.shown``), a page puts it in as text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

MISSING = "–"
KIND_WORDS = {
    "submitted": "submitted",
    "launched": "launched",
    "stop_requested": "stop asked",
    "stopped": "stopped",
    "suspend_requested": "suspended (time slice over)",
    "resume_requested": "resumed",
    "restarting": "restarting",
    "succeeded": "succeeded",
    "failed": "failed",
    "cancelled": "cancelled",
    "priority": "priority changed",
}
"""An event's kind in words, for the history's "what" column."""


def value_text(value: object) -> str:
    """A field's value: a dash for none, numbers as they are."""
    if value is None:
        return MISSING
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def devices_text(devices: object, types: object) -> str:
    """``n0:0 (v100), n0:1 (v100)``: each device (``"node:i"`` or ``[node, i]``) with its
    GPU type, where every device has one."""
    if not isinstance(devices, list):
        return str(devices)
    names = [":".join(map(str, d)) if isinstance(d, list) else str(d) for d in devices]
    if not isinstance(types, list) or len(types) != len(names):
        types = [""] * len(names)
    return ", ".join(f"{n} ({t})" if t else n for n, t in zip(names, types, strict=True))


def _launched(detail: dict[str, Any]) -> str:
    on = devices_text(detail.pop("devices", None) or [], detail.pop("gpu_types", None))
    said = f"{value_text(detail.pop('workers', '?'))} GPU(s) on {on}"
    if "batch" in detail:
        said += f", batch {value_text(detail.pop('batch'))}"
    counted = detail.pop("counted", None)
    if counted not in (None, "start"):
        said += f" ({value_text(counted)})"
    return said


def _stop_requested(detail: dict[str, Any]) -> str:
    signal = " (by signal)" if detail.pop("signal", False) else ""
    return f"for {value_text(detail.pop('reason', '?'))}{signal}"


def _stopped(detail: dict[str, Any]) -> str:
    said = f"for {value_text(detail.pop('reason', '?'))}"
    return said + _at_step(detail, ", at")


def _ended(detail: dict[str, Any]) -> str:
    """``succeeded``/``failed``/``restarting``: where it got to and how its ranks exited."""
    parts = []
    if "reason" in detail:
        parts.append(value_text(detail.pop("reason")).replace("_", " "))
    codes = detail.pop("codes", None)
    if isinstance(codes, dict) and codes:
        parts.append(exits_text(codes))
    if "attempt" in detail:
        parts.append(f"attempt {value_text(detail.pop('attempt'))}")
    ended = detail.pop("ended_ranks", None)
    if isinstance(ended, list) and ended:
        parts.append(f"ranks {', '.join(map(str, ended))} ended for lingering")
    step = _at_step(detail, "at")
    return ", ".join(parts + ([step.strip()] if step else []))


def exits_text(codes: Mapping[Any, Any]) -> str:
    """``rank 0 exit 1, rank 2 exit 137``: how each rank ended, in rank order (the ranks
    ints as the controller has them, or text as JSON gives them back)."""
    if not codes:
        return "no rank's exit status was found"
    ranks = sorted(codes.items(), key=lambda rc: int(rc[0]) if str(rc[0]).isdigit() else -1)
    return ", ".join(f"rank {r} exit {value_text(c)}" for r, c in ranks)


def gang_failed(generation: int, codes: Mapping[Any, Any]) -> str:
    """The first line of a job's error where its gang exited non-zero, which
    ``failure_line`` knows to look past for the ranks' own last words."""
    return f"generation {generation} failed: {exits_text(codes)}"


_GANG_FAILED = re.compile(r"generation \d+ failed: ")


def _priority(detail: dict[str, Any]) -> str:
    return f"from {value_text(detail.pop('from', '?'))} to {value_text(detail.pop('to', '?'))}"


def _at_step(detail: dict[str, Any], lead: str) -> str:
    step = detail.pop("step", None)
    return "" if step is None else f"{lead} step {value_text(step)}"


SENTENCES: dict[str, Callable[[dict[str, Any]], str]] = {
    "launched": _launched,
    "stop_requested": _stop_requested,
    "stopped": _stopped,
    "succeeded": _ended,
    "failed": _ended,
    "restarting": _ended,
    "priority": _priority,
}


def event_words(event: dict[str, Any]) -> str:
    """What one event says after its time and kind; fields no sentence takes follow as
    ``key=value`` (JSON values), so nothing an event holds is hidden."""
    detail = {k: v for k, v in event.items() if k not in ("t", "kind", "warning", "text")}
    detail.pop("generation", None)  # said by the history's order; the API keeps it
    sentence = SENTENCES.get(str(event.get("kind")))
    parts = [sentence(detail)] if sentence is not None else []
    for key, value in detail.items():
        text = value if isinstance(value, str) else json.dumps(value, separators=(", ", ": "))
        parts.append(f"{key}={text}")
    return " ".join(p for p in parts if p)


def failure_line(error: object) -> str | None:
    """A failed job's why in one line, for listings: where the gang just exited non-zero,
    the last line its ranks wrote (``python: can't open file ...``, an exception), else
    the error's own first line (a diverged job, damaged checkpoints)."""
    if not isinstance(error, str) or not error.strip():
        return None
    first, *rest = error.strip().splitlines()
    if not _GANG_FAILED.match(first):
        return first[:300]
    for line in reversed(rest):
        said = re.sub(r"^\[rank\d+\] ", "", line).strip()
        if said and not said.startswith("---"):
            return said[:300]
    return first[:300]
