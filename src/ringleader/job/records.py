"""What a job writes into its own directory, read back as hostile input.

A job can write anything into its directory: ``progress.jsonl``, its exit
files and its logs are in reach of the user's own code, and the scheduler
must not take a single value from them on trust. Everything the controller,
the API and the CLI read back from a job directory passes through here:

* ``progress_record`` turns one line of ``progress.jsonl`` into a record of
  known keys with strict types (an ``int`` is never a ``bool`` or a string),
  finite numbers within bounds and bounded strings, or ``None`` for a line
  to skip. Unknown keys are dropped, so nothing unexpected is stored or
  served. Callers count the lines skipped and show the count on the job.
* ``read_exit_code`` reads a rank's exit file, a few bytes at most.

Why a table rather than a pydantic model: the controller reads every line
a job writes, thousands a minute, and each key's rule fits in one line.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

MAX_LINE = 64 << 10
"""A progress line longer than this is skipped unread (the library writes ~300 bytes)."""
MAX_TEXT = 4096
"""Longest string value kept from a progress line."""

EVENTS = frozenset(
    {
        "attached",
        "started",
        "stopped",
        "done",
        "suspended",
        "resumed",
        "checkpointed",
        "checkpoint_skipped",
        "checkpoints_damaged",
        "diverged",
    }
)
"""Lifecycle events the job library writes; any other ``event`` makes a line bad."""


class BadValue(ValueError):
    """One value of a progress line breaks its key's rule."""


def _integer(low: int, high: int) -> Callable[[Any], int]:
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise BadValue(f"expected an integer, got {type(value).__name__}")
        if not low <= value <= high:
            raise BadValue(f"{value} is outside {low}..{high}")
        return value

    return check


def _number(low: float, high: float, *, above: bool = False) -> Callable[[Any], float]:
    def check(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise BadValue(f"expected a number, got {type(value).__name__}")
        number = float(value)
        if not math.isfinite(number):
            raise BadValue(f"{value} is not finite")
        if not low <= number <= high or (above and number == low):
            raise BadValue(f"{value} is outside {low:g}..{high:g}")
        return number

    return check


def _optional(rule: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        return None if value is None else rule(value)

    return check


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise BadValue(f"expected a string, got {type(value).__name__}")
    if len(value) > MAX_TEXT:
        raise BadValue(f"a string of {len(value)} characters (at most {MAX_TEXT})")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate (``"\ud800"``): no UTF-8 for it
            raise BadValue("a string that is not valid Unicode") from None
    return value


def _event(value: Any) -> str:
    if not isinstance(value, str) or value not in EVENTS:
        raise BadValue(f"unknown event {str(value)[:40]!r}")
    return str(value)


_TIME = _optional(_number(0.0, 1e11))
"""A wall-clock time (seconds since the epoch) or null."""
_COUNT = 2**53
"""Steps and sizes beyond this lose precision as JSON numbers."""

RULES: dict[str, Callable[[Any], Any]] = {
    "g": _integer(0, 2**31),
    "event": _event,
    "step": _integer(0, _COUNT),
    "restored_step": _optional(_integer(0, _COUNT)),
    "epoch": _number(0.0, 1e9),
    "loss": _optional(_number(-1e300, 1e300)),
    "step_time": _number(0.0, 1e6, above=True),
    "world_size": _integer(1, 65536),
    "lr": _optional(_number(-1e300, 1e300)),
    "batch_per_worker": _number(0.0, 1e12),
    "examples_per_epoch": _number(0.0, 1e15),
    "grad_bytes": _number(0.0, 1e15),
    "memory_gib": _number(0.0, 1e6),
    # A job's gradient statistics (``job.batching.gradient_fields``): an early estimate
    # may be negative, so only finiteness is asked; the batch bounds it runs under.
    "grad_sqr": _number(-1e300, 1e300),
    "grad_var": _number(-1e300, 1e300),
    "batch_min": _number(0.0, 1e12),
    "batch_max": _number(0.0, 1e12),
    "per_gpu_max": _number(0.0, 1e12),
    "t": _TIME,
    "path": _text,
    "why": _text,
}
"""Every key a progress line may carry, with its rule. ``t_*`` keys are times."""


def progress_record(raw: bytes | str) -> dict[str, Any] | None:
    """One progress line as a checked record, or ``None`` if any part of it is bad.

    A line is bad if it is too long, not UTF-8, not a JSON object, has a
    duplicate key, or has a known key whose value breaks its rule. Keys not
    in ``RULES`` (and not ``t_*`` times) are dropped.
    """
    if len(raw) > MAX_LINE:
        return None
    try:
        value = strict_json(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    out: dict[str, Any] = {}
    try:
        for key, item in value.items():
            rule = RULES.get(key)
            if rule is None and key.startswith("t_") and len(key) <= 40 and _plain(key):
                rule = _TIME
            if rule is not None:
                out[key] = rule(item)
    except BadValue:
        return None
    return out


def _plain(key: str) -> bool:
    return key.isascii() and key.isidentifier()


def strict_json(text: str | bytes) -> Any:
    """JSON as RFC 8259 has it: a repeated key or ``NaN``/``Infinity`` is a ``ValueError``.

    Python's ``json`` keeps the last of repeated keys and reads the
    JavaScript constants; both hide what a sender meant. Used for what jobs
    write and for what clients send.
    """
    return json.loads(text, object_pairs_hook=_unique, parse_constant=_no_constant)


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"key {key[:60]!r} appears twice; give each field once")
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number; give a finite number")


def progress_lines(chunk: bytes) -> tuple[list[dict[str, Any]], int]:
    """The checked records of ``chunk``'s lines, and how many lines were bad."""
    records, bad = [], 0
    for raw in chunk.split(b"\n"):
        if not raw.strip():
            continue
        record = progress_record(raw)
        if record is None:
            bad += 1
        else:
            records.append(record)
    return records, bad


def read_regular(path: Path, offset: int, limit: int) -> bytes | None:
    """Up to ``limit`` bytes of a regular file from ``offset``; ``None`` if there is none.

    Opened non-blocking and checked, so a FIFO or a device a job put in its
    directory under an expected name cannot stall the reader; a symbolic link
    is not followed, so a job cannot have the scheduler read a file the job
    itself may not (``/etc/shadow`` as its log).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        os.lseek(fd, offset, os.SEEK_SET)
        return os.read(fd, limit)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_progress(path: Path) -> Iterator[dict[str, Any] | None]:
    """Every non-empty line of a progress file, checked: a record, or ``None`` for a bad line.

    Read in slices, so neither a long history nor one endless line is ever
    held in memory whole.
    """
    offset, carry, skipping = 0, b"", False
    while True:
        chunk = read_regular(path, offset, READ_SLICE)
        if not chunk:
            break
        offset += len(chunk)
        lines = (carry + chunk).split(b"\n")
        carry = lines.pop()
        for raw in lines:
            if skipping:  # the rest of a line already counted as too long
                skipping = False
            elif raw.strip():
                yield progress_record(raw)
        if len(carry) > MAX_LINE:
            if not skipping:
                yield None
            carry, skipping = b"", True
    if carry.strip() and not skipping:
        yield progress_record(carry)


READ_SLICE = 1 << 20

EXIT_BYTES = 16
_EXIT_CODE = re.compile(rb"-?[0-9]{1,4}")


def read_exit_code(path: Path) -> int | None:
    """A rank's exit code from its exit file; ``None`` if missing, unreadable or not a code.

    Read a few bytes at most: the file sits in the job's own directory, where
    the job could have put anything, of any size, or a FIFO.
    """
    raw = read_regular(path, 0, EXIT_BYTES + 1)
    if raw is None:
        return None
    text = raw.strip()
    if len(raw) > EXIT_BYTES or _EXIT_CODE.fullmatch(text) is None:
        return None
    code = int(text)
    return code if -255 <= code <= 255 else None


def rank_of(path: Path, suffix: str) -> int | None:
    """The rank in a file name like ``rank3.exit``; ``None`` for any other name."""
    digits = path.name.removeprefix("rank").removesuffix(suffix)
    if not path.name.startswith("rank") or not (digits.isascii() and digits.isdigit()):
        return None
    return int(digits) if len(digits) <= 6 else None
