"""Measured step times by placement and per-GPU batch: a job model that is a table first.

A fitted speed model (``perf.speed``) flattens what was measured into five
coefficients; where a job was measured, a policy and the simulator should see
the measurement. ``StepTable`` holds seconds per step and the gradient-sync part
of it for each placement (GPUs on each node, e.g. ``(2, 2)``: two nodes of two)
at each per-GPU batch, and answers between them as Pollux's simulator does
(OSDI'21, artifact ``simulator/applications.py``): a measured placement is
interpolated linearly in the batch; any other is interpolated linearly over
(nodes, GPUs, batch) across every measured point, the larger-scale rows of
``scalability.csv`` included. A query outside what was measured is an error
(``OutsideMeasurements``), never a silent extrapolation. Curves need not be
monotone: a table answers with what was measured.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ringleader.perf._kept_spread import KeptSpread
from ringleader.perf.profile_files import ProfileError, csv_rows, number, whole

Placement = tuple[int, ...]
"""GPUs used on each node the job spans, in any order: ``(4, 2)`` is six GPUs on two nodes."""

NODE_CAP = 16
"""Pollux's measurements span at most 16 nodes; a wider placement is read as 16 nodes."""


class OutsideMeasurements(ProfileError):
    """A step time asked for where the table has no measurements around it."""


def canonical(placement: Iterable[int]) -> Placement:
    """The placement as its table key: empty nodes dropped, rotated to the smallest order.

    A ring does not care where it starts, so ``(2, 1, 1)`` and ``(1, 1, 2)`` are one
    measurement (Pollux's simulator keys its traces the same way).
    """
    nodes = tuple(g for g in placement if g)
    if not nodes:
        return nodes
    return min(nodes[i:] + nodes[:i] for i in range(len(nodes)))


@dataclass(frozen=True)
class StepTable:
    """Seconds per step and their gradient-sync part, by placement and per-GPU batch."""

    by_placement: dict[Placement, tuple[np.ndarray, np.ndarray, np.ndarray]]
    """Per measured placement: per-GPU batches (ascending), step times, sync times."""
    scale_points: np.ndarray = field(default_factory=lambda: np.empty((0, 5)))
    """Rows of (nodes, GPUs, per-GPU batch, step time, sync time) measured at larger scale."""
    _memo: dict[tuple[Placement, float], tuple[float, float]] = field(
        default_factory=dict, compare=False, repr=False
    )
    _spread: list[KeptSpread] = field(default_factory=list, compare=False, repr=False)

    @property
    def batch_range(self) -> tuple[float, float]:
        """The smallest and largest per-GPU batch measured anywhere."""
        lows = [b[0][0] for b in self.by_placement.values()]
        highs = [b[0][-1] for b in self.by_placement.values()]
        return min(lows), max(highs)

    def times(self, placement: Sequence[int], batch: float) -> tuple[float, float]:
        """(step, sync) seconds for one step of ``batch`` examples per GPU on ``placement``.

        Raises ``OutsideMeasurements`` where nothing measured surrounds the query.
        """
        key = canonical(placement)
        memo = self._memo.get((key, batch))
        if memo is not None:
            return memo
        found = self.by_placement.get(key)
        if found is not None and found[0][0] <= batch <= found[0][-1]:
            batches, step, sync = found
            answer = float(np.interp(batch, batches, step)), float(np.interp(batch, batches, sync))
        else:
            answer = self._across(key, batch)
        self._memo[(key, batch)] = answer
        return answer

    def times_many(self, placement: Sequence[int], batches: np.ndarray) -> np.ndarray:
        """``times`` for many per-GPU batches on one placement: an array of (step, sync)
        rows, NaN where nothing measured surrounds a batch."""
        key = canonical(placement)
        found = self.by_placement.get(key)
        out = np.full((len(batches), 2), np.nan)
        inside = np.zeros(len(batches), dtype=bool)
        if found is not None:
            measured, step, sync = found
            inside = (batches >= measured[0]) & (batches <= measured[-1])
            out[inside, 0] = np.interp(batches[inside], measured, step)
            out[inside, 1] = np.interp(batches[inside], measured, sync)
        if not inside.all():
            rest = batches[~inside]
            points = np.column_stack(
                [np.full(len(rest), min(len(key), NODE_CAP)), np.full(len(rest), sum(key)), rest]
            )
            out[~inside] = self._interpolator()(points)
        return out

    def prepare(self, queries: Sequence[tuple[Sequence[int], float]]) -> None:
        """Work out the answers to many (placement, batch) queries at once, for ``times``.

        One call of the interpolator over (nodes, GPUs, batch) for all the unmeasured
        placements among them: a call costs milliseconds however many points it takes.
        """
        keys = [(canonical(p), b) for p, b in queries]
        across = []
        for key, batch in dict.fromkeys(keys):
            found = self.by_placement.get(key)
            measured = found is not None and found[0][0] <= batch <= found[0][-1]
            if not measured and (key, batch) not in self._memo:
                across.append((key, batch))
        if not across:
            return
        points = [[min(len(k), NODE_CAP), sum(k), b] for k, b in across]
        try:
            answers = self._interpolator()(points)
        except OutsideMeasurements:
            return  # each query says so itself, where it is asked
        for (key, batch), (step, sync) in zip(across, answers, strict=True):
            if math.isfinite(step) and math.isfinite(sync):
                self._memo[(key, batch)] = (float(step), float(sync))

    def _interpolator(self) -> KeptSpread:
        """The interpolator over every measured point, its answers kept between processes."""
        if not self._spread:
            points, values = self._points()
            made = KeptSpread(points, values, lambda: self._triangulate(points, values))
            self._spread.append(made)
        return self._spread[0]

    def _triangulate(self, points: np.ndarray, values: np.ndarray) -> Any:
        """scipy's interpolator over the measured points, made on the first call not kept.

        Its triangulation's barycentric transforms (one small LAPACK solve per
        simplex) are worked out here on one BLAS thread: left to the default two,
        on a busy two-core machine each solve waited on the other thread's spin,
        and cifar10's 3,914 took 42 s instead of 20 ms.
        """
        from scipy.interpolate import LinearNDInterpolator  # only an unmeasured placement
        from scipy.spatial import QhullError
        from threadpoolctl import threadpool_limits

        try:
            with threadpool_limits(1):
                interpolator = LinearNDInterpolator(points, values)
                _ = interpolator.tri.transform
        except (QhullError, ValueError):
            raise OutsideMeasurements(
                f"the {len(points)} measured (nodes, GPUs, per-GPU batch) points span no "
                "volume to interpolate an unmeasured placement in: measure more "
                f"placements, or use only the measured ones ({self._measured()})"
            ) from None
        return interpolator

    def _across(self, key: Placement, batch: float) -> tuple[float, float]:
        """Linear interpolation over (nodes, GPUs, batch) across every measured point."""
        nodes = min(len(key), NODE_CAP)
        step, sync = self._interpolator()([nodes, sum(key), batch])[0]
        if not (math.isfinite(step) and math.isfinite(sync)):
            lo, hi = self.batch_range
            raise OutsideMeasurements(
                f"no measurements around {sum(key)} GPUs on {len(key)} nodes {key} at "
                f"{batch:g} examples per GPU (measured: per-GPU batch {lo:g} to {hi:g})"
            )
        return float(step), float(sync)

    def _measured(self) -> str:
        shown = sorted(self.by_placement)[:8]
        more = len(self.by_placement) - len(shown)
        names = ", ".join("".join(map(str, p)) for p in shown)
        return names + (f" and {more} more" if more > 0 else "")

    def _points(self) -> tuple[np.ndarray, np.ndarray]:
        """Each measured (nodes, GPUs, batch) once, its times averaged over placements."""
        sums: dict[tuple[int, int, float], list[float]] = {}
        for key, (batches, step, sync) in self.by_placement.items():
            for b, t, s in zip(batches, step, sync, strict=True):
                acc = sums.setdefault((len(key), sum(key), float(b)), [0.0, 0.0, 0.0])
                acc[0] += t
                acc[1] += s
                acc[2] += 1
        rows = [[*k, t / n, s / n] for k, (t, s, n) in sorted(sums.items())]
        table = np.vstack([np.asarray(rows, dtype=float), self.scale_points])
        return table[:, :3], table[:, 3:]


def read_step_table(
    folder: Path, placements: str = "placements.csv", scalability: str | None = None
) -> StepTable:
    """``placements`` (and ``scalability.csv`` if present) of one application's profile.

    ``scalability``: the larger-scale file to read too, which must then exist (None:
    ``scalability.csv`` where there is one). Sia's profiles keep one pair per GPU type
    in a folder (``placements-rtx.csv``, ``scalability-rtx.csv``). Raises
    ``ProfileError`` naming the file, the row and the field that is wrong.
    """
    path = folder / placements
    rows: dict[Placement, list[tuple[float, float, float]]] = {}
    for line, row in csv_rows(path, ("placement", "local_bsz", "step_time", "sync_time")):
        key = canonical(_placement(path, line, row["placement"]))
        rows.setdefault(key, []).append(_times(path, line, row))
    if not rows:
        raise ProfileError(f"{path}: no measurements (a header and no rows)")
    by_placement = {}
    for key, measured in rows.items():
        measured.sort()
        arr = np.asarray(measured, dtype=float)
        by_placement[key] = (arr[:, 0], arr[:, 1], arr[:, 2])
    scale = folder / (scalability or "scalability.csv")
    if scalability is not None and not scale.is_file():
        raise ProfileError(f"{scale}: no such file")
    points = np.empty((0, 5))
    if scale.exists():
        fields = ("num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time")
        found = []
        for line, row in csv_rows(scale, fields):
            nodes = whole(scale, line, row, "num_nodes")
            gpus = whole(scale, line, row, "num_replicas")
            if gpus < nodes:
                raise ProfileError(
                    f"{scale}:{line}: num_replicas {gpus} is fewer than num_nodes {nodes}; "
                    "each node the job spans holds at least one of its GPUs"
                )
            found.append([nodes, gpus, *_times(scale, line, row)])
        if found:
            points = np.asarray(found, dtype=float)
    return StepTable(by_placement, points)


def _times(path: Path, line: int, row: dict[str, str]) -> tuple[float, float, float]:
    """(per-GPU batch, step time, sync time) of one row, each checked."""
    batch = number(path, line, row, "local_bsz")
    if batch < 1:
        raise ProfileError(f"{path}:{line}: local_bsz {batch:g} must be at least 1 example")
    step = number(path, line, row, "step_time")
    if step <= 0:
        raise ProfileError(f"{path}:{line}: step_time {step:g} must be positive seconds")
    sync = number(path, line, row, "sync_time")
    if not 0 <= sync <= step:
        raise ProfileError(
            f"{path}:{line}: sync_time {sync:g} must be between 0 and step_time {step:g} "
            "(it is the part of the step spent synchronising gradients)"
        )
    return batch, step, sync


def _placement(path: Path, line: int, raw: str) -> Placement:
    """``"1344"`` → ``(1, 3, 4, 4)``: one digit per node, its GPU count."""
    text = raw.strip()
    if not text.isdigit() or "0" in text:
        raise ProfileError(
            f"{path}:{line}: placement {raw!r} must be digits 1-9, one per node: the GPUs "
            "the job uses there (e.g. 22 for two nodes of two GPUs)"
        )
    return tuple(int(c) for c in text)
