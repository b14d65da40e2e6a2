"""How fast a job runs on each GPU type: measured, looked up, or estimated.

Two sources of truth, one shape: a job's speed on each type *relative* to a
reference (1.0), so that a policy can compare types without knowing what a
step is.

* **Gavel's table** (bundled, MIT; ``data/throughputs``): steps/s of 26 job
  types on V100, P100 and K80 at 1, 2, 4 and 8 GPUs. The simulator reads
  a job type's relative speeds from it (``gavel_type_speeds``). Across job
  types the ratios differ widely (ResNet-50 runs 7× faster on a V100 than on
  a K80, A3C 2×, and recommendation models faster on a P100 than a V100):
  that spread is what a type-aware scheduler exploits.
* **Measurements** (the runtime): a job's mean step time on each type it ran
  on. A type it never ran on is *estimated* from the types it did run on
  and the types' typical relative speed (``TYPE_FACTORS``), and marked as
  estimated (``TypeSpeeds.estimated``).
"""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

GAVEL_TYPES = ("v100", "p100", "k80")
GAVEL_SCALES = (1, 2, 4, 8)


@lru_cache(maxsize=1)
def gavel_measurements() -> dict[str, Any]:
    """The bundled table as Gavel wrote it: per GPU type (and ``*_unconsolidated``),
    ``"('JOB TYPE', SCALE)"`` → ``{"null": steps/s alone, PARTNER: [pair]}``. Read once
    for everyone who needs it (traces, contention, interference, type speeds)."""
    path = Path(str(resources.files("ringleader") / "data" / "throughputs"))
    table: dict[str, Any] = json.loads((path / "gavel_simulation_throughputs.json").read_text())
    return table


@lru_cache(maxsize=1)
def _table() -> dict[str, dict[tuple[str, int], float]]:
    raw = gavel_measurements()
    out: dict[str, dict[tuple[str, int], float]] = {}
    for gpu in GAVEL_TYPES:
        out[gpu] = {}
        for key, entry in raw[gpu].items():
            name, scale = ast.literal_eval(key)
            out[gpu][(str(name), int(scale))] = float(entry["null"])
    return out


def gavel_steps_per_s(job_type: str, gpu_type: str, scale: int = 1) -> float | None:
    """Gavel's measured steps/s of ``job_type`` on ``scale`` GPUs of ``gpu_type``."""
    return _table().get(gpu_type, {}).get((job_type, scale))


def gavel_job_types(scale: int = 1) -> tuple[str, ...]:
    """Job types measured at ``scale`` GPUs on every Gavel type."""
    names = {n for (n, s) in _table()["v100"] if s == scale}
    return tuple(sorted(n for n in names if all((n, scale) in _table()[t] for t in GAVEL_TYPES)))


def gavel_type_speeds(job_type: str, scale: int = 1, reference: str = "v100") -> dict[str, float]:
    """``job_type``'s speed on each Gavel type over its speed on ``reference`` (0: cannot run)."""
    base = gavel_steps_per_s(job_type, reference, scale)
    if not base:
        raise KeyError(f"no measurement of {job_type!r} at {scale} GPUs on {reference}")
    return {t: (gavel_steps_per_s(job_type, t, scale) or 0.0) / base for t in GAVEL_TYPES}


@lru_cache(maxsize=1)
def _gavel_factors() -> dict[str, float]:
    """Each Gavel type's geometric-mean speed over job types, relative to a V100."""
    logs: dict[str, list[float]] = {t: [] for t in GAVEL_TYPES}
    for name in gavel_job_types(1):
        speeds = gavel_type_speeds(name)
        if all(v > 0 for v in speeds.values()):
            for t, v in speeds.items():
                logs[t].append(math.log(v))
    return {t: math.exp(sum(v) / len(v)) for t, v in logs.items()}


TYPE_FACTORS: Mapping[str, float] = _gavel_factors()
"""What a type is worth where a job has not said: Gavel's types (V100 1.0, P100
0.94, K80 0.30: the geometric mean over its job types); any other type
name is taken as 1.0 until jobs measure it."""


@dataclass(frozen=True, slots=True)
class TypeSpeeds:
    """A job's speed on each type, relative to its fastest measured type (1.0)."""

    speeds: Mapping[str, float] = field(default_factory=dict)
    estimated: frozenset[str] = frozenset()
    """Types in ``speeds`` the job never ran on: derived from the types' relative speed."""


def type_speeds(
    step_s: Mapping[str, float],
    types: tuple[str, ...],
    factors: Mapping[str, float] = TYPE_FACTORS,
) -> TypeSpeeds:
    """Relative speeds on ``types`` from the job's mean step seconds per measured type.

    A measured type's speed is the inverse of its step time. An unmeasured
    type ``u`` is estimated from every measured type ``m`` as
    ``speed(m) × factor(u) / factor(m)`` and the estimates averaged
    geometrically. With nothing measured, there is nothing to say (empty).
    """
    measured = {t: 1.0 / s for t, s in step_s.items() if s > 0}
    if not measured:
        return TypeSpeeds()
    best = max(measured.values())
    speeds = {t: v / best for t, v in measured.items()}
    estimated = []
    for u in types:
        if u in speeds:
            continue
        logs = [math.log(speeds[m] * factors.get(u, 1.0) / factors.get(m, 1.0)) for m in measured]
        speeds[u] = math.exp(sum(logs) / len(logs))
        estimated.append(u)
    return TypeSpeeds(speeds, frozenset(estimated))
