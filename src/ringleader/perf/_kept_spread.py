"""The spread interpolator's answers, kept on disk between processes.

Importing scipy's interpolation and triangulating a profile's measured points
costs a fresh process most of a second, while the questions a simulation asks
of a table are the same from one run of a workload to the next. So each call's
answers are kept under the user's cache directory, by a digest of the measured
points and of the call's query points, and a later process that asks the same
call reads them back without importing scipy at all.

A call is the unit kept, not a point: scipy's ``LinearNDInterpolator`` locates
each point by a walk that starts where the previous point of the same call
ended, and on the coplanar faces of a measured grid two simplices hold a point
with slightly different answers. A kept call therefore gives exactly the
numbers a fresh call would, and a point never takes its answer from another
call's neighbours.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

FORMAT = 1
"""Bumped whenever what a kept answer means changes, so that old files are not read."""

MOST_CALLS = 4096
"""Calls kept per table: past it the oldest go first, so a sweep cannot grow a file for ever."""


def cache_dir() -> Path | None:
    """Where kept answers live: ``RINGLEADER_CACHE``, else the XDG cache; None turns keeping off.

    ``RINGLEADER_CACHE=`` (empty) keeps nothing, for a run that must compute everything.
    """
    chosen = os.environ.get("RINGLEADER_CACHE")
    if chosen is not None:
        return Path(chosen) if chosen else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ringleader"


class KeptSpread:
    """Answers of ``make()``'s interpolator, read from disk where this call was asked before.

    ``make`` builds the interpolator (and may raise); it runs only on the first
    call that was not kept. Answers found are written back once, at exit.
    """

    def __init__(self, points: np.ndarray, values: np.ndarray, make: Callable[[], Any]) -> None:
        self._make = make
        self._made: Any = None
        digest = hashlib.sha256(f"{FORMAT}:{points.shape}:{values.shape}".encode())
        digest.update(np.ascontiguousarray(points, dtype=float).tobytes())
        digest.update(np.ascontiguousarray(values, dtype=float).tobytes())
        where = cache_dir()
        self._file = where / f"spread-{digest.hexdigest()[:32]}.json" if where else None
        self._answers: dict[str, list[list[float]]] | None = None
        self._written_at_exit = False

    def __call__(self, queries: Any) -> np.ndarray:
        asked = np.atleast_2d(np.asarray(queries, dtype=float))
        key = hashlib.sha256(f"{asked.shape}".encode() + asked.tobytes()).hexdigest()[:32]
        kept = self._kept().get(key)
        if kept is not None:
            try:
                return np.asarray(kept, dtype=float).reshape(len(asked), -1)
            except (TypeError, ValueError):
                pass  # a damaged entry is asked again
        if self._made is None:
            self._made = self._make()
        answers = np.asarray(self._made(asked), dtype=float)
        self._keep(key, answers)
        return answers

    def _kept(self) -> dict[str, list[list[float]]]:
        if self._answers is None:
            self._answers = _read(self._file) if self._file else {}
        return self._answers

    def _keep(self, key: str, answers: np.ndarray) -> None:
        if self._file is None:
            return
        kept = self._kept()
        kept.pop(key, None)  # a damaged entry asked again goes to the back
        kept[key] = answers.tolist()
        _drop_oldest(kept)
        if not self._written_at_exit:
            atexit.register(self.write)
            self._written_at_exit = True

    def write(self) -> None:
        """Merge with what other processes kept meanwhile, then replace the file whole.

        Runs at exit where anything new was asked; calling it earlier is harmless.
        """
        if self._file is None or self._answers is None:
            return
        merged = {**_read(self._file), **self._answers}
        _drop_oldest(merged)
        try:
            self._file.parent.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(dir=self._file.parent, prefix=".spread-")
        except OSError:
            return  # a cache that cannot be written only costs the next run its time
        try:
            with os.fdopen(fd, "w") as out:
                json.dump(merged, out)
            os.replace(name, self._file)
        except OSError:
            Path(name).unlink(missing_ok=True)


def _drop_oldest(kept: dict[str, list[list[float]]]) -> None:
    """Drop the first-kept calls past ``MOST_CALLS`` (a dict keeps the order they came in)."""
    while len(kept) > MOST_CALLS:
        kept.pop(next(iter(kept)))


def _read(path: Path) -> dict[str, list[list[float]]]:
    """The kept answers in ``path``; nothing where it is missing, unreadable or not ours."""
    try:
        with path.open() as kept:
            found = json.load(kept)
    except (OSError, ValueError):
        return {}
    if not isinstance(found, dict):
        return {}
    return {k: v for k, v in found.items() if isinstance(k, str) and isinstance(v, list)}
