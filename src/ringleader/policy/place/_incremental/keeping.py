"""Which jobs keep the GPUs they hold, before anyone else is placed.

Jobs whose size did not change keep their GPUs, shrinking jobs keep a subset
on the nodes where they have most, and the rest (new, growing, or whose GPUs
another job kept) are left to the place stage. ``keep_held`` works this out
from scratch; ``LastKept`` works out only what changed since the last
decision, which is what a simulator or a controller asks at every event.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import cast

from ringleader.policy.model._incremental.beside import ahead
from ringleader.policy.model.views import ClusterView, Device, JobView, memo_of
from ringleader.policy.place._incremental.free import FreeGPUs

_OUTCOME = "kept outcome"
"""The slot of a view's memo where ``LastKept`` hangs the job's outcome (it names its
keeper)."""


def keep_subset(devices: Sequence[Device], count: int) -> tuple[Device, ...]:
    """``count`` of ``devices``, on the nodes where the job has most (a shrink moves least)."""
    per_node: dict[str, int] = {}
    for d in devices:
        per_node[d.node] = per_node.get(d.node, 0) + 1
    ranked = sorted(devices, key=lambda d: (-per_node[d.node], d.node, d.index))
    return tuple(sorted(ranked[:count]))


def keep_held(
    counts: Mapping[str, int], jobs: Sequence[JobView], free: FreeGPUs
) -> tuple[dict[str, tuple[Device, ...]], list[JobView]]:
    """Jobs that keep (a subset of) the GPUs they hold, taken from ``free``; and the
    jobs left to place: new, growing, or whose GPUs another job kept."""
    placed: dict[str, tuple[Device, ...]] = {}
    to_place: list[JobView] = []
    for job in _held_last(jobs):
        want = counts.get(job.id, 0)
        if want == 0:
            continue
        kept = _keep_one(job, want, free.free)
        if kept is None:
            to_place.append(job)
        else:
            free.take_devices(kept)
            placed[job.id] = kept
    return placed, to_place


def _keep_one(
    job: JobView, want: int, gpus: Mapping[str, Collection[int]]
) -> tuple[Device, ...] | None:
    """What ``job`` keeps of its GPUs while ``gpus`` are free (None: it is to be placed)."""
    current = tuple(d for d in job.devices if d.index in gpus.get(d.node, ()))
    if len(current) < want:
        return None
    if len(current) == want == len(job.devices):
        return job.devices
    return current if len(current) == want else keep_subset(current, want)


def _claim(owner: dict[Device, str], job: JobView) -> bool:
    """Note ``job`` as the holder of its GPUs in ``owner``; False where one is already
    held (by another job, or twice by itself): then the order decides who keeps it.
    Keyed by the device itself, which hashes as ``(node, index)`` would, with no tuple
    built per device."""
    for d in job.devices:
        if d in owner:
            return False
        owner[d] = job.id
    return True


def _held_last(jobs: Sequence[JobView]) -> Sequence[JobView]:
    """``jobs`` with suspended ones last, in the order ``keep_held`` visits them: a
    time-sliced group's running job keeps its GPUs before a suspended resident of the
    group may, as moving the suspended one costs no running progress."""
    # A loop, not ``any`` over a generator (docs/scale.md, "The compiled hot path").
    for one in jobs:
        if one.suspended:
            return [job for job in jobs if not job.suspended] + [j for j in jobs if j.suspended]
    return jobs


class Outcome:
    """One job's last outcome: its devices and GPU count as asked, the GPUs it keeps
    (None: to place), and the decision that last saw it (``LastKept._stamp``). With the
    job's id, so the outcomes of jobs that left are found among the values alone; and
    with its keeper while it is the job's outcome there (None once dropped), so one
    found on a view (``views.Memo``) is known current."""

    __slots__ = ("asked", "held", "job_id", "keeper", "kept", "stamp")

    def __init__(
        self,
        job_id: str,
        held: tuple[Device, ...],
        asked: int,
        kept: tuple[Device, ...] | None,
        stamp: int,
        keeper: LastKept,
    ) -> None:
        self.job_id = job_id
        self.held = held
        self.asked = asked
        self.kept = kept
        self.stamp = stamp
        self.keeper: LastKept | None = keeper


class LastKept:
    """``keep_held`` across decisions, redone only for the jobs that changed.

    From one event to the next most running jobs ask for the same count on the
    same GPUs, and while no two jobs hold the same GPU each job's outcome
    depends on nothing but its own GPUs and count. So the last decision's
    outcome is kept per job, with the free GPUs it left, and a decision gives
    back the GPUs of jobs that left or changed and works out only those that
    changed (docs/scale.md, "Kept GPUs"). Where
    two jobs hold a GPU in common (packing, time-slicing) the order decides
    who keeps it, and every decision works it all out again (``keep_held``).
    Outputs are the same either way (the jobs left to place may come in another
    order: the place stages sort them by a total key; the jobs that keep GPUs,
    in another order too: the stages look them up); one decision's worth is
    kept. Each kept outcome is stamped with the last decision that saw it, so
    the jobs that left are found without a set of who stayed. The GPUs each
    job keeps are kept as one dictionary too, changed where outcomes change and
    handed out as a copy, not filled anew. Outcomes are kept by job id, and each
    is hung on the view it was last seen in too (``views.Memo``), as the body hands
    most views over again (docs/scale.md, "Views the bodies keep, and the memo on
    each view").
    """

    __slots__ = ("_cluster", "_free", "_gpus", "_last", "_owner", "_placed", "_seen", "_stamp")

    def __init__(self) -> None:
        self._cluster: ClusterView | None = None
        self._gpus: dict[str, range] = {}
        self._free: FreeGPUs | None = None
        self._last: dict[str, Outcome] = {}
        self._owner: dict[Device, str] = {}
        self._placed: dict[str, tuple[Device, ...]] = {}
        """The GPUs each job in ``_last`` keeps, where it keeps any."""
        self._stamp = 0
        self._seen: list[JobView] | None = None
        """The views the last decision walked, in its order: this one walks its own beside
        them, and finds the jobs that left among those it passes over."""

    def keep_held(
        self, counts: Mapping[str, int], jobs: Sequence[JobView], cluster: ClusterView
    ) -> tuple[FreeGPUs, dict[str, tuple[Device, ...]], list[JobView]]:
        """``keep_held`` on a fresh ``FreeGPUs(cluster)``: the free GPUs left, the jobs
        that keep GPUs, and the jobs left to place."""
        free = self._free
        if cluster is not self._cluster or free is None:
            return self._afresh(counts, jobs, cluster)
        # Not to be trusted until this decision is through: an error half-way (the
        # runtime keeps running after a policy error) leaves the next one afresh.
        self._free = None
        kept = self._again(counts, jobs, free)
        if kept is None:
            return self._afresh(counts, jobs, cluster)
        self._free = free
        return kept

    def _again(
        self, counts: Mapping[str, int], jobs: Sequence[JobView], free: FreeGPUs
    ) -> tuple[FreeGPUs, dict[str, tuple[Device, ...]], list[JobView]] | None:
        """The last decision's outcome, changed where jobs changed; None where it must be
        worked out afresh (a GPU held twice, a job id given twice)."""
        last, owner, placed = self._last, self._owner, self._placed
        stamp = self._stamp = self._stamp + 1
        # A dict's look-up compiles to a call into C, any other mapping's to a method call.
        wants: dict[str, int] = counts if isinstance(counts, dict) else dict(counts)
        to_place: list[JobView] = []  # in no particular order: the place stage sorts it
        changed: list[tuple[JobView, int]] = []
        hits = 0
        walk = _walked(jobs)
        before, self._seen = self._seen, None  # (until this one is through)
        ends = 0 if before is None else len(before)
        at = 0
        """Where this walk is in the last one's: every view before it was met again, or
        passed over (its job may have left)."""
        passed: list[JobView] = []
        for job in walk:
            if before is not None:  # (the last walk's views beside this one's)
                if at < ends and before[at] is job:
                    at += 1
                else:
                    at = _beside(before, at, job, passed)
                    if at < 0:
                        before = None  # out of step: the jobs that left are looked for
            job_id = job.id
            want = wants.get(job_id, 0)
            if want == 0:
                if before is not None and _current(job, self) is not None:
                    passed.append(job)  # asks for none now: it gives its GPUs back
                continue
            hit = _current(job, self)
            if hit is None:
                hit = last.get(job_id)
                if hit is not None:
                    memo_of(job)[_OUTCOME] = hit  # this view, seen again
            if hit is not None:
                if hit.stamp == stamp:
                    return None  # a job id given twice
                held = hit.held
                if hit.asked == want and (held is job.devices or held == job.devices):
                    hit.stamp = stamp
                    hits += 1
                    if hit.kept is None:
                        to_place.append(job)
                    continue
            changed.append((job, want))
        gone = len(last) - hits
        if gone:  # jobs left, or ask for something else: give their GPUs back
            if before is not None:
                passed.extend([job for job, _ in changed])  # (their old outcomes go)
            found = None if before is None else _left(last, stamp, gone, passed, before, at)
            for job_id in _unstamped(last, stamp, gone) if found is None else found:
                outcome = last.pop(job_id)
                outcome.keeper = None
                for d in outcome.held:
                    del owner[d]
                if outcome.kept is not None:
                    del placed[job_id]
                    free.give_devices(outcome.kept)
        for job, want in changed:
            if job.id in last or not _claim(owner, job):
                return None
            kept = _keep_one(job, want, self._gpus)
            outcome = Outcome(job.id, job.devices, want, kept, stamp, self)
            last[job.id] = memo_of(job)[_OUTCOME] = outcome
            if kept is None:
                to_place.append(job)
            else:
                free.take_devices(kept)
                placed[job.id] = kept
        self._seen = walk
        return free.copy(), placed.copy(), to_place

    def _afresh(
        self, counts: Mapping[str, int], jobs: Sequence[JobView], cluster: ClusterView
    ) -> tuple[FreeGPUs, dict[str, tuple[Device, ...]], list[JobView]]:
        """``keep_held`` itself; kept for the next decision where no GPU is held twice."""
        free = FreeGPUs(cluster)
        placed, to_place = keep_held(counts, jobs, free)
        _drop(self._last)
        self._cluster, self._free, self._last, self._owner = None, None, {}, {}
        self._seen = None
        self._placed = {}
        owner: dict[Device, str] = {}
        last: dict[str, Outcome] = {}
        stamp = self._stamp
        for job in _held_last(jobs):
            want = counts.get(job.id, 0)
            if want == 0:
                continue
            if job.id in last or not _claim(owner, job):
                _drop(last)
                return free, placed, to_place  # nothing kept: see _again
            outcome = Outcome(job.id, job.devices, want, placed.get(job.id), stamp, self)
            last[job.id] = memo_of(job)[_OUTCOME] = outcome
        self._seen = _walked(jobs)
        kept = free.copy()
        kept.index()  # kept up to date from here on, so each decision's copy starts with it
        self._cluster, self._free, self._last, self._owner = cluster, kept, last, owner
        self._placed = dict(placed)
        self._gpus = {n.name: range(n.gpus) for n in cluster.nodes}
        return free, placed, to_place


def _current(job: JobView, keeper: LastKept) -> Outcome | None:
    """The outcome hung on ``job``'s view, if it is ``keeper``'s current one for it."""
    memo = job.memo
    if memo is None:
        return None
    outcome = cast("Outcome | None", memo.get(_OUTCOME))
    return outcome if outcome is not None and outcome.keeper is keeper else None


def _drop(last: dict[str, Outcome]) -> None:
    """Mark the outcomes of ``last`` as no one's: the views they hang on no longer
    stand for a kept outcome."""
    for outcome in last.values():
        outcome.keeper = None


def _walked(jobs: Sequence[JobView]) -> list[JobView]:
    """``_held_last(jobs)`` as a list (docs/scale.md, "The compiled hot path")."""
    walk = _held_last(jobs)
    return walk if isinstance(walk, list) else list(walk)


def _beside(before: list[JobView], at: int, job: JobView, passed: list[JobView]) -> int:
    """Where the walk is in ``before`` past ``job`` (a new view of a job keeps its place),
    the views passed over on the way to it noted in ``passed``; ``at`` where ``job`` is
    new, or -1 where it is not near enough to tell (``beside.ahead``)."""
    found = ahead(before, at, job)
    if found >= 0:
        for k in range(at, found):
            passed.append(before[k])
        return found + 1
    if not before or job.submitted_at >= before[-1].submitted_at:
        return at  # new, at the end
    return -1


def _left(
    last: dict[str, Outcome],
    stamp: int,
    count: int,
    passed: list[JobView],
    before: list[JobView],
    at: int,
) -> list[str] | None:
    """The ``count`` jobs of ``last`` not stamped ``stamp``, among the views in ``passed``
    (those of the last walk this one passed over, and of jobs met that changed or ask
    for none) and those of the last walk it never reached (None: not all are there)."""
    found: dict[str, None] = {}  # (in the order found, each once)
    for view in passed:
        _unseen(last, view.id, stamp, found)
    for k in range(at, len(before)):
        _unseen(last, before[k].id, stamp, found)
    return list(found) if len(found) == count else None


def _unseen(last: dict[str, Outcome], job_id: str, stamp: int, found: dict[str, None]) -> None:
    outcome = last.get(job_id)
    if outcome is not None and outcome.stamp != stamp:
        found[job_id] = None


def _unstamped(last: dict[str, Outcome], stamp: int, count: int) -> list[str]:
    """The first ``count`` jobs in ``last`` not stamped ``stamp`` (there are that many):
    the walk stops at the last one rather than reading every outcome. It reads the
    values alone, building no (id, outcome) tuple per job."""
    found: list[str] = []
    for outcome in last.values():
        if outcome.stamp != stamp:
            found.append(outcome.job_id)
            if len(found) == count:
                break
    return found
