"""Why each job waits, or has the GPUs it has: read from a Plan, for people.

Every policy's Plan says where jobs run, not why the others do not. What the
Plan and the snapshot do say is enough for the first question a user asks:
are there no free GPUs (and who holds them), is the job time-sliced out (and
when its next turn should come, from the policy's rotation: ``Plan.turns``),
is it held back by its owner's quota, or are there GPUs free that the
policy's order gives to other jobs first. A running job says why it has its
size, in the policy's own account (``Plan.sizing``): the marginal gain that
stopped its growth, its maximum, or a policy of fixed sizes. Each reason has
a stable code for programs and a sentence for people. Pure: both bodies can
use it.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ringleader.policy.model import plan as sizes
from ringleader.policy.model.plan import Plan, Sizing
from ringleader.policy.model.views import ClusterView, JobView
from ringleader.policy.size.growth import start_size
from ringleader.policy.size.payback import MARGIN

QUOTA = "over_quota"
NO_FREE_GPUS = "no_free_gpus"
TIME_SLICE = "time_sliced_out"
IN_ORDER = "behind_in_order"
SMALLER = "runs_smaller"
"""Runs on fewer GPUs than it may, where the plan gives no account of its size."""
SIZED_BY_GAIN = "sized_by_gain"
"""Running at the size the policy's marginal-gain sizing stopped at (``Reason.sizing``)."""
FIXED_SIZE = "fixed_size"
"""Running at the fixed size the policy gives it (its request, or the policy's one size)."""
PROFILING = "profiling"
"""Running a probe of exploratory profiling."""
GROWN_IDLE = "grown_idle"
"""Running on more GPUs than it asked for: idle ones, while no job waits."""
DISK_FULL = "disk_full"
"""Set by a body, not by ``explain``: an action it could not carry out for want of room."""


@dataclass(frozen=True, slots=True)
class Reason:
    """A code for programs and a sentence for people, with the numbers behind them.

    ``turn_at`` (on the deciding body's clock) and ``turn_in_s`` (from the
    decision): when a time-sliced-out job should run next. ``sizing``: the
    policy's account of a running job's size.
    """

    code: str
    text: str
    turn_at: float | None = None
    turn_in_s: float | None = None
    sizing: Sizing | None = None


def explain(
    plan: Plan,
    views: Sequence[JobView],
    owner: Mapping[str, str],
    capacity: int,
    quota_reasons: Mapping[str, str],
    *,
    now: float | None = None,
    cluster: ClusterView | None = None,
) -> dict[str, Reason]:
    """A reason for each job: why it waits, or why it runs on the GPUs it has.

    ``now``: the time of the decision, on the clock the policy was given; a
    time-sliced-out job's next turn is counted from it. ``cluster``: where a job
    is confined to GPU types, its free GPUs are counted among those types only.
    """
    running = [v for v in views if plan.of(v.id).running]
    # Held, not only running: a time-sliced job keeps its place on its GPUs.
    free = max(capacity - plan.held_gpus, 0)
    holders = sorted(running, key=lambda v: -plan.of(v.id).workers)
    # Submission times of the jobs not running, sorted: how many wait ahead of a
    # job is one binary search, not a scan (this runs at every decision).
    waiting = sorted(v.submitted_at for v in views if not plan.of(v.id).running)
    out: dict[str, Reason] = {}
    held_of_type: dict[str, int] | None = None  # worked out once, if a job names types
    for v in views:
        a = plan.of(v.id)
        sizing = plan.sizing.get(v.id) if a.running else None
        if v.id in quota_reasons:
            out[v.id] = Reason(QUOTA, quota_reasons[v.id])
        elif a.suspended:
            out[v.id] = _sliced(plan, v, len(a.devices), now)
        elif not a.running and v.gpu_types and cluster is not None:
            if held_of_type is None:
                held_of_type = _held_per_type(plan, cluster)
            of_types = sum(
                max(cluster.capacity_of(t) - held_of_type.get(t, 0), 0) for t in v.gpu_types
            )
            if v.min_gpus > of_types:
                kinds = "/".join(v.gpu_types)
                out[v.id] = Reason(
                    NO_FREE_GPUS,
                    f"needs {v.min_gpus} {kinds} GPU(s), {of_types} free; held by "
                    + _who(holders, plan, owner)
                    + f" ({sum(map(cluster.capacity_of, v.gpu_types))} {kinds} in all)",
                )
            else:
                out[v.id] = _behind(v, of_types, waiting)
        elif not a.running and v.min_gpus > free:
            out[v.id] = Reason(
                NO_FREE_GPUS,
                f"needs {v.min_gpus} GPU(s), {free} free; held by "
                + _who(holders, plan, owner)
                + f" ({capacity} in all)",
            )
        elif not a.running:
            out[v.id] = _behind(v, free, waiting)
        elif sizing is not None and sizing.workers == a.workers:
            out[v.id] = _sized(sizing, v, _who(holders, plan, owner, but=v.id))
        elif v.elastic and a.workers < v.max_gpus:
            out[v.id] = Reason(
                SMALLER,
                f"runs on {a.workers} of up to {v.max_gpus} GPUs: "
                + (
                    "no more are free"
                    if free == 0
                    else "the policy judged more would not pay (speed gained against "
                    "the restart a resize costs)"
                ),
            )
    return out


def _behind(v: JobView, free: int, waiting: Sequence[float]) -> Reason:
    ahead = bisect.bisect_left(waiting, v.submitted_at)
    return Reason(
        IN_ORDER,
        f"{free} GPU(s) free but kept for jobs the policy ranks first"
        + (f"; {ahead} job(s) submitted earlier also wait" if ahead else ""),
    )


def _held_per_type(plan: Plan, cluster: ClusterView) -> dict[str, int]:
    """GPUs some job holds in ``plan``, per GPU type (a packed GPU counts once)."""
    held = {(d.node, d.index) for a in plan.assignments.values() for d in a.devices}
    per_type: dict[str, int] = {}
    for node, _ in held:
        t = cluster.type_of(node)
        per_type[t] = per_type.get(t, 0) + 1
    return per_type


def _sliced(plan: Plan, v: JobView, gpus: int, now: float | None) -> Reason:
    head = f"time-sliced out: keeps its place on {gpus} GPU(s)"
    turn = plan.turns.get(v.id)
    if turn is None:
        return Reason(TIME_SLICE, head + " and runs again at its next turn")
    before = f"{turn.ahead} job(s) take a turn before it, {turn.quantum_s:g} s quanta"
    if now is None:
        return Reason(TIME_SLICE, f"{head}; next turn at t={turn.at:g} ({before})", turn.at)
    wait = max(turn.at - now, 0.0)
    return Reason(TIME_SLICE, f"{head}; next turn in ~{wait:.0f} s ({before})", turn.at, wait)


def _sized(s: Sizing, v: JobView, others: str) -> Reason:
    """The sentence for a running job's size, from the policy's own ``Sizing``."""
    w = s.workers
    head = f"runs on {w} GPU(s)"
    code, why = SIZED_BY_GAIN, ""
    if s.stop == sizes.FIXED:
        code = FIXED_SIZE
        if w == v.requested_gpus and not v.elastic:
            why = "the job is not elastic, so it runs at its requested size"
        elif w == v.requested_gpus:
            why = "the policy gives each job a fixed size, its requested gpus; no growth weighed"
        else:
            why = f"the policy gives each job a fixed size ({w}); no growth weighed"
    elif s.stop == sizes.PROBING:
        code = PROFILING
        why = (
            f"exploratory profiling measures its speed at this size (holding {s.held} "
            "for its larger probes) before the policy sizes it"
        )
    elif s.stop == sizes.GROWN_IDLE:
        code = GROWN_IDLE
        why = (
            f"more than the {v.requested_gpus} it asked for, grown onto idle GPUs while "
            "no job waits; it shrinks back when one does"
        )
    elif s.stop == sizes.ALLOTTED:
        why = (
            "the policy's allocation over GPU types and counts, solved for the whole "
            "cluster each round, gives it these"
        )
    elif s.stop == sizes.AT_MAX:
        if s.limit is not None and s.limit < v.max_gpus:
            why = f"the policy may give it at most {s.limit} (its owner's quota)"
        elif w >= v.max_gpus:
            why = f"at its max_gpus ({v.max_gpus})"
        else:
            why = f"growing by the policy's next step would pass its max_gpus ({v.max_gpus})"
    elif s.stop == sizes.NO_MODEL:
        why = "no speed model to size it by (measured at one size only)"
    elif s.stop == sizes.UNMEASURED:
        why = (
            f"not measured yet, so it grows no further than its start size "
            f"({start_size(v)}) until it reports"
        )
    else:
        why = _weighed(s, v, others)
    return Reason(code, f"{head}: {why}", sizing=s)


def _weighed(s: Sizing, v: JobView, others: str) -> str:
    """A step the greedy allocator weighed and did not take, in its own numbers."""
    n, before, after, gain = s.next_workers, s.before_s, s.after_s, s.gain_per_gpu
    if n is None or before is None or after is None or gain is None:
        return "the policy's sizing stopped here"
    what, per = ("time per epoch", " per epoch") if s.per_epoch else ("remaining time", "")
    guess = "" if s.measured else " (its model is a guess until it reports)"
    if s.stop == sizes.NO_GAIN:
        return (
            f"{n} would not cut its predicted {what} ({_s(before)} s at {s.workers}, "
            f"{_s(after)} s at {n}){guess}: no marginal gain"
        )
    cut = (1.0 - after / before) * 100 if before > 0 else 0.0
    step = (
        f"{n} would cut its predicted {what} by {_pct(cut)}% ({_s(before)} s to "
        f"{_s(after)} s{per}, {_s(gain)} s{per} per added GPU){guess}"
    )
    if s.stop == sizes.RESTART_NOT_WON:
        saved = "" if s.saved_s is None else f" ({_s(s.saved_s)} s of its remaining time)"
        return (
            f"{step}; what the resize saves{saved} is less than {MARGIN:g}× "
            f"the {_s(v.restart_s)} s restart it costs"
        )
    need = n - s.workers
    if s.free:
        return f"{step}, but needs {need} more GPU(s) and {s.free} were left"
    if s.bar is not None and gain <= s.bar:
        return (
            f"{step}: below the marginal gain of every step the policy took "
            f"(the least, {_s(s.bar)} s{per} per GPU); the other GPUs are held by {others}"
        )
    return f"{step}, but no GPUs were left; the others are held by {others}"


def _pct(percent: float) -> str:
    """A percentage for a sentence: whole from 10 up, two figures below."""
    return f"{percent:.0f}" if abs(percent) >= 9.5 else f"{percent:.2g}"


def _s(seconds: float) -> str:
    """Seconds for a sentence: whole from 100 up, three figures below."""
    return f"{seconds:.0f}" if abs(seconds) >= 100 else f"{seconds:.3g}"


def _who(
    holders: Sequence[JobView], plan: Plan, owner: Mapping[str, str], but: str | None = None
) -> str:
    """The largest holders by name (three), and how many more; ``but`` one of them left out."""
    named = [
        f"{v.id} ({owner.get(v.id, '?')}, {plan.of(v.id).workers})"
        for v in holders[:4]
        if v.id != but
    ][:3]
    more = len(holders) - (but is not None) - len(named)
    return (", ".join(named) or "nobody") + (f" and {more} more" if more > 0 else "")
