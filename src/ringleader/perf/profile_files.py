"""Reading measured-profile CSV files: every bad cell named by file, line and field."""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Sequence
from pathlib import Path


class ProfileError(ValueError):
    """A profile file that cannot be read; the message names the file, row and field."""


def csv_rows(path: Path, fields: Sequence[str]) -> Iterable[tuple[int, dict[str, str]]]:
    """(line number, row) of a CSV file whose header has ``fields``."""
    try:
        text = path.read_text()
    except OSError as err:
        raise ProfileError(f"{path}: cannot read: {err.strerror or err}") from None
    reader = csv.DictReader(text.splitlines())
    missing = [f for f in fields if f not in (reader.fieldnames or ())]
    if missing:
        raise ProfileError(
            f"{path}: the header lacks {', '.join(missing)} (expected {','.join(fields)})"
        )
    yield from enumerate(reader, start=2)


def number(path: Path, line: int, row: dict[str, str], name: str) -> float:
    """``row[name]`` as a finite number, or a ``ProfileError`` that names the cell."""
    raw = row.get(name)
    try:
        value = float(raw or "")
    except ValueError:
        raise ProfileError(f"{path}:{line}: {name} {raw!r} is not a number") from None
    if not math.isfinite(value):
        raise ProfileError(f"{path}:{line}: {name} is {raw!r}; give a finite number")
    return value


def whole(path: Path, line: int, row: dict[str, str], name: str) -> int:
    """``row[name]`` as a whole number >= 1, or a ``ProfileError`` that names the cell."""
    value = number(path, line, row, name)
    if value < 1 or value != int(value):
        raise ProfileError(f"{path}:{line}: {name} {row[name]!r} must be a whole number >= 1")
    return int(value)
