"""How fairly a run shared GPUs between users, measured against their fair share.

A user's fair share at an instant is their weighted max-min share of the
cluster over what their jobs could use then (``policy.fairshare.waterfill``,
the same rule the fair-share policy applies). Over a window, a user *with
demand* (jobs in the system for the whole window) is served fairly when the
GPU-seconds their jobs ran are at least a fraction of the GPU-seconds their
fair share integrates to. ``served`` gives that ratio per window and user.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ringleader.policy.order.fairshare import waterfill


@dataclass(frozen=True, slots=True)
class ShareSample:
    """From ``time`` until the next sample: GPUs running each user's jobs, and the GPUs
    those jobs could use (their demand)."""

    time: float
    gpus: Mapping[str, int]
    demand: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class Served:
    """One user over one window: GPU-seconds run and GPU-seconds of fair share."""

    start: float
    user: str
    gpu_s: float
    fair_gpu_s: float

    @property
    def ratio(self) -> float:
        return self.gpu_s / self.fair_gpu_s if self.fair_gpu_s > 0 else float("inf")


def served(
    samples: Sequence[ShareSample],
    capacity: int,
    *,
    window_s: float = 3600.0,
    step_s: float | None = None,
    weights: Mapping[str, float] | None = None,
    until: float | None = None,
) -> list[Served]:
    """Each user's GPU-seconds against their fair share, per window, for users who had
    demand for the whole window. Windows start at the first sample, every
    ``step_s`` (default: back to back; smaller slides them, to check "any hour"),
    and end before ``until`` (default: the last sample)."""
    if not samples:
        return []
    end = samples[-1].time if until is None else until
    out: list[Served] = []
    start = samples[0].time
    while start + window_s <= end + 1e-9:
        stop = start + window_s
        got: dict[str, float] = {}
        fair: dict[str, float] = {}
        always: set[str] | None = None
        for i, s in enumerate(samples):
            nxt = samples[i + 1].time if i + 1 < len(samples) else end
            lo, hi = max(s.time, start), min(nxt, stop)
            if hi <= lo:
                continue
            present = {u for u, d in s.demand.items() if d > 0}
            always = present if always is None else always & present
            w = {u: (weights or {}).get(u, 1.0) for u in s.demand}
            for u, share in waterfill(capacity, s.demand, w).items():
                fair[u] = fair.get(u, 0.0) + share * (hi - lo)
            for u, n in s.gpus.items():
                got[u] = got.get(u, 0.0) + n * (hi - lo)
        for u in sorted(always or ()):
            out.append(Served(start, u, got.get(u, 0.0), fair.get(u, 0.0)))
        start += window_s if step_s is None else step_s
    return out


@dataclass(frozen=True, slots=True)
class UserShare:
    """One user over a whole run: GPU-seconds run, fair GPU-seconds while they had
    jobs, and the worst hour (the smallest ``Served.ratio``; None: no whole hour
    with demand)."""

    user: str
    gpu_s: float
    fair_gpu_s: float
    worst_hour: float | None


def by_user(
    samples: Sequence[ShareSample],
    capacity: int,
    *,
    weights: Mapping[str, float] | None = None,
    step_s: float = 600.0,
) -> list[UserShare]:
    """Each user's run-long totals and worst hour (hours sliding by ``step_s``)."""
    if not samples:
        return []
    hours = served(samples, capacity, step_s=step_s, weights=weights)
    totals: dict[str, tuple[float, float]] = {}
    for i, s in enumerate(samples[:-1]):
        span = samples[i + 1].time - s.time
        w = {u: (weights or {}).get(u, 1.0) for u in s.demand}
        fair = waterfill(capacity, s.demand, w)
        for u in {*s.demand, *s.gpus}:
            got, owed = totals.get(u, (0.0, 0.0))
            totals[u] = (got + s.gpus.get(u, 0) * span, owed + fair.get(u, 0) * span)
    worst: dict[str, float] = {}
    for r in hours:
        worst[r.user] = min(worst.get(r.user, float("inf")), r.ratio)
    return [UserShare(u, g, f, worst.get(u)) for u, (g, f) in sorted(totals.items())]
