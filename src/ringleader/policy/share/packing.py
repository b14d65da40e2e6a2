"""Packing with introspection, Gandiva's way: two jobs on one GPU, kept only if it helps.

Two jobs taking turns on a GPU each progress half the time. Run together
instead, each runs slower than alone, but if the slowdown is small (one
job's input pipeline or small kernels leave the GPU idle much of the time)
their summed progress beats taking turns. Nobody can tell in advance, so
Gandiva tries: a pair runs packed for a trial window, then is kept only if
the sum of each job's minibatch time alone over its time packed beats
time-slicing (1.0) by ``keep_gain``, and otherwise reverted and never tried
again. Everything it judges by is in the snapshot — each job's measured
minibatch time alone (``JobView.observations``) and packed with each partner
(``JobView.packed``) — so the judgment is a pure function.

``Packing`` is used by Gandiva's own stack (``policy.sharing``) and by the
share stage ``TimeSlice`` (the default policy), on single-GPU groups.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ringleader.policy.model.views import JobView

DEFAULT_TRIAL_WINDOW_S = 45.0
"""Packed running time before a trial is judged: three quarters of Gandiva's 60-s quantum."""
DEFAULT_KEEP_GAIN = 1.05


@dataclass(frozen=True, slots=True)
class Verdict:
    """A packing trial's state: untestable, under way (``seconds_left``), or judged.

    ``gain`` is the pair's summed progress rate packed, relative to each alone
    (time-slicing the two gives 1.0); the pair is kept when ``keep``.
    """

    seconds_left: float | None = None
    gain: float | None = None
    keep: bool = False


@dataclass(frozen=True, slots=True)
class Packing:
    """When to pack a second job beside a GPU's runner, judged by measurement."""

    trial_window_s: float = DEFAULT_TRIAL_WINDOW_S
    keep_gain: float = DEFAULT_KEEP_GAIN

    def __post_init__(self) -> None:
        if not (math.isfinite(self.trial_window_s) and self.trial_window_s > 0):
            raise ValueError(f"trial_window_s must be positive, got {self.trial_window_s}")

    def verdict(self, a: JobView, b: JobView) -> Verdict:
        """What introspection knows about packing ``a`` with ``b``."""
        left, gain = self._judge(a, b)
        if gain is not None:
            return Verdict(gain=gain, keep=gain >= self.keep_gain)
        return Verdict(seconds_left=left)

    def _judge(self, a: JobView, b: JobView) -> tuple[float | None, float | None]:
        """``verdict``'s ``seconds_left`` and ``gain``, without building one: ``partner``
        asks it of every pair in every time-sliced group at every decision."""
        alone_a = a.observations.get(a.requested_gpus)
        alone_b = b.observations.get(b.requested_gpus)
        if alone_a is None or alone_b is None:
            return None, None  # nothing to compare a trial against yet
        pa, pb = a.packed.get(b.id), b.packed.get(a.id)
        measured = min(pa.seconds if pa else 0.0, pb.seconds if pb else 0.0)
        if measured < self.trial_window_s or pa is None or pb is None:
            return self.trial_window_s - measured, None
        gain = _ratio(alone_a.step_time, pa.step_time) + _ratio(alone_b.step_time, pb.step_time)
        return None, gain

    def partner(
        self, runner: JobView, residents: Sequence[JobView], now: float, gpu_memory: float
    ) -> tuple[JobView | None, float | None]:
        """A resident to pack beside ``runner``: the best proven pair, else one on trial
        (with when its trial ends), else none. Never one of higher priority than the
        runner: it would be the one to run, not the partner."""
        best: tuple[float, JobView] | None = None
        trial: tuple[JobView, float] | None = None
        for other in residents:
            if other is runner or other.priority > runner.priority:
                continue
            if not memory_fits(runner, other, gpu_memory):
                continue
            left, gain = self._judge(runner, other)
            if gain is not None:
                if gain >= self.keep_gain and (best is None or gain > best[0]):
                    best = (gain, other)
            elif left is not None and (trial is None or other.running):
                trial = (other, now + left)
        if best is not None:
            return best[1], None
        if trial is not None:
            return trial
        return None, None


def memory_fits(a: JobView, b: JobView, gpu_memory: float) -> bool:
    """Whether both jobs' peak device memory fits one GPU (unknown: the trial will show)."""
    if a.memory_gib is None or b.memory_gib is None:
        return True
    return a.memory_gib + b.memory_gib <= gpu_memory


def _ratio(alone: float, packed: float) -> float:
    # ``not math.isfinite(packed) or packed <= 0``, written out: asked twice per pair in
    # every packed group at every decision (docs/scale.md, "The compiled hot path").
    if packed <= 0 or packed == math.inf or packed != packed:  # -inf, inf, nan
        return 0.0
    return alone / packed
