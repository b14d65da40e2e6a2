"""How much two jobs slow each other when packed onto one GPU (Gandiva's packing).

From Gavel's measured throughputs (bundled, MIT): for every pair of job types
on one GPU, each job's steps/s while sharing it, next to its steps/s alone.
A job's *packed speed* is the ratio (1.0 = no interference); the *gain* of a
packing is the sum of both ratios — above 1 the GPU does more useful work
packed than time-sliced, which is what introspection checks for real.

Single-GPU jobs only (scale factor 1 in the table): Gandiva packs jobs that
each use one GPU. A pair measured at 0 steps/s for either job could not run
together (for example for lack of memory): ``fits`` is False for it.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from ringleader.perf.gpu_types import gavel_measurements


class UnknownJobType(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True)
class InterferenceModel:
    gpu: str
    alone: Mapping[str, float]
    """Steps/s of each job type alone on one GPU."""
    packed: Mapping[tuple[str, str], tuple[float, float]]
    """Steps/s of (a, b) while sharing one GPU."""

    @property
    def job_types(self) -> list[str]:
        return sorted(self.alone)

    def _check(self, name: str) -> None:
        if name not in self.alone:
            raise UnknownJobType(
                f"no measurements for job type {name!r} on {self.gpu}; known: "
                f"{', '.join(self.job_types)}"
            )

    def speeds(self, a: str, b: str) -> tuple[float, float]:
        """Each job's speed while packed, as a fraction of its speed alone (≤ 1)."""
        self._check(a)
        self._check(b)
        pair = self.packed.get((a, b))
        if pair is None:
            reverse = self.packed.get((b, a))
            if reverse is None:
                raise UnknownJobType(f"no packed measurement for {a!r} with {b!r}")
            pair = (reverse[1], reverse[0])
        return (min(1.0, pair[0] / self.alone[a]), min(1.0, pair[1] / self.alone[b]))

    def fits(self, a: str, b: str) -> bool:
        """Whether the two could run packed at all (both made progress when measured)."""
        fa, fb = self.speeds(a, b)
        return fa > 0 and fb > 0

    def gain(self, a: str, b: str) -> float:
        """Useful work per GPU-second packed, relative to time-slicing the two (1.0)."""
        fa, fb = self.speeds(a, b)
        return fa + fb


@lru_cache(maxsize=4)
def load_interference(gpu: str = "v100") -> InterferenceModel:
    """The bundled measurements for ``gpu`` (k80, p100 or v100)."""
    table = gavel_measurements()
    if gpu not in table:
        raise UnknownJobType(f"no measurements for GPU {gpu!r}; known: {', '.join(table)}")
    alone: dict[str, float] = {}
    packed: dict[tuple[str, str], tuple[float, float]] = {}
    for key, entry in table[gpu].items():
        name, scale = ast.literal_eval(key)
        if scale != 1:
            continue
        alone[name] = float(entry["null"])
        for other_key, pair in entry.items():
            if other_key == "null":
                continue
            other, other_scale = ast.literal_eval(other_key)
            if other_scale == 1:
                packed[(name, other)] = (float(pair[0]), float(pair[1]))
    return InterferenceModel(gpu, alone, packed)
