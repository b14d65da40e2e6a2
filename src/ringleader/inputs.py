"""Reading what users hand us, and naming the field at fault: shared by every loader."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def read_capped(path: Path, limit: int, what: str, error: type[ValueError]) -> str:
    """The text of ``path``, or ``error`` saying why not (missing, too big, not UTF-8)."""
    try:
        size = path.stat().st_size
        if size > limit:
            raise error(f"{path}: {size} bytes is larger than the {limit} allowed for {what}")
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise error(f"{path}: cannot read the {what}: {err}") from err


def field_path(loc: Sequence[int | str], whole: str) -> str:
    """A pydantic error location as users write it: ``jobs[2].max_gpus``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or whole
