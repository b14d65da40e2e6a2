"""A policy: order → size → place, as one pure function of a snapshot.

``Policy.decide(jobs, cluster, now) -> Plan`` is the only thing the simulator
and the runtime call. A policy is a composition of public stages, each a
small pure protocol in its folder's ``stage.py`` (``docs/policies.md`` shows a
user-written one):

* **order** (``policy/order/``): who is served first — FIFO, least attained
  service, priority, fair share between users;
* **profile** (``policy/profile/``): where each job's speed model comes from;
* **size** (``policy/size/``): how many GPUs each gets — its request, or elastic
  growth by marginal gain (doubling, Optimus);
* **place** (``policy/place/``): which GPUs — fewest nodes, or by GPU type;
* **share** (``policy/share/``): jobs the plan left waiting take turns on GPUs
  that are held (time-slicing);
* **traffic** (``ringleader.policy.traffic``): priority ranks for parameter
  servers that send through one host's NIC (TensorLights).

Profiling sits between order and size: with exploratory profiling, GPUs are
claimed in this order, which is the explore/optimise trade-off the seed
describes:

1. explorations already under way keep the GPUs they hold;
2. every profiled job gets its minimum, in the order stage's order;
3. new explorations start, in FIFO order, while their largest probe size fits;
4. the size stage grows profiled jobs with what is left, never a running job
   past its size where the restart would not be won back
   (``ringleader.policy.size.payback``).

Under light load step 3 almost always succeeds and exploration costs only the
probes; under heavy load new jobs wait behind the profiled ones.

With fair share (``ringleader.policy.order.fairshare``) and more than one user,
steps 2 and 4 run twice: first each user within their share, then what is
left over, to anyone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ringleader.policy.allot.deciding import place_allotted
from ringleader.policy.model.arrival import fifo
from ringleader.policy.model.memory import Memory, memory_of
from ringleader.policy.model.needs import Needs
from ringleader.policy.model.objective import Candidate
from ringleader.policy.model.plan import Assignment, Plan, SizingNotes, Turn, probing_note
from ringleader.policy.model.views import ClusterView, Device, JobView
from ringleader.policy.order.fairshare import claim
from ringleader.policy.order.queues import Fifo
from ringleader.policy.order.stage import Order, user_shares
from ringleader.policy.pipeline._incremental.assigning import LastAssignments
from ringleader.policy.place.fewest_nodes import FewestNodes
from ringleader.policy.place.stage import Place
from ringleader.policy.place.type_aware import TypeAware
from ringleader.policy.profile.sources import Precompute
from ringleader.policy.profile.stage import Profiling
from ringleader.policy.share.stage import Share
from ringleader.policy.size.growth import Counts
from ringleader.policy.size.stage import Allocator, TypedAllocator
from ringleader.policy.size.steps import Growth
from ringleader.policy.traffic import Traffic

MAX_RESIZES_FOR_TYPES = 8
"""Times a decision sizes again without jobs their GPU types could not hold."""


@dataclass(frozen=True, slots=True)
class Policy:
    """A composition of stages (see the module docstring)."""

    name: str
    size: Allocator
    profiling: Profiling = field(default_factory=Precompute)
    order: Order = field(default_factory=Fifo)
    place: Place = field(default_factory=FewestNodes)
    share: Share | None = None
    traffic: Traffic | None = None
    memory: Memory[LastAssignments] = field(
        default_factory=memory_of(LastAssignments), init=False, repr=False, compare=False
    )
    """The last decision's assignments (``model.memory``): not part of what the policy is,
    nor of its equality."""

    def memories(self) -> dict[str, Memory[Any]]:
        """What this policy keeps between decisions, by part: its own and each stage's that
        keeps anything (``model.memory``). Nothing else in it changes."""
        parts = {"pipeline": self, "profiling": self.profiling, "order": self.order}
        parts |= {"size": self.size, "place": self.place, "share": self.share}
        parts["traffic"] = self.traffic
        found: dict[str, Memory[Any]] = {}
        for name, part in parts.items():
            memory = getattr(part, "memory", None)
            if isinstance(memory, Memory):
                found[name] = memory
        return found

    def forget(self) -> None:
        """Drop everything kept between decisions: the next one works it all out afresh."""
        for memory in self.memories().values():
            memory.forget()

    @property
    def _needs_speed(self) -> bool:
        return self.size.needs_speed or self.order.needs_speed

    @property
    def needs(self) -> Needs:
        speed = self._needs_speed
        return Needs(
            true_model=speed and self.profiling.known_on_arrival,
            true_remaining=self.size.needs_true_remaining or self.order.needs_true_remaining,
            speed_model=speed,
            profiling=speed and self.profiling.probes,
            time_slicing=self.share is not None,
            packing=self.share is not None and self.share.packs,
            traffic=self.traffic is not None,
        )

    def decide(self, jobs: Sequence[JobView], cluster: ClusterView, now: float) -> Plan:
        plan, unplaced = self._decide(jobs, cluster, now)
        # A job confined to GPU types with too few GPUs free could not be placed at the
        # size it was given: it waits, and the others are sized again without it, so
        # the GPUs it was counted on go to someone who can use them.
        for _ in range(MAX_RESIZES_FOR_TYPES):
            if not unplaced:
                break
            jobs = [j for j in jobs if j.id not in unplaced]
            plan, unplaced = self._decide(jobs, cluster, now)
        return plan

    def _decide(
        self, jobs: Sequence[JobView], cluster: ClusterView, now: float
    ) -> tuple[Plan, set[str]]:
        ordered = fifo(jobs)
        if self._needs_speed:
            known, exploring = self.profiling.split(ordered, cluster)
        else:
            known, exploring = [Candidate(job, None) for job in ordered], []
        free = cluster.capacity
        held: Counts = {}
        """GPUs each job holds: its size, or a probe's hold (``Probe.hold``)."""
        workers: Counts = {}
        """A probing job's workers, where they differ from what it holds; every other
        job's are what it holds (one dictionary fewer to fill per job)."""
        wake: float | None = None

        def explore(job: JobView) -> bool:
            nonlocal free, wake
            probe = self.profiling.probe(job)
            if probe is None or probe.hold > free:
                return False
            held[job.id] = probe.hold
            workers[job.id] = probe.workers
            free -= probe.hold
            due = now + probe.seconds_left
            wake = due if wake is None else min(wake, due)
            return True

        fresh = []
        for job in exploring:
            if job.workers > 0 or job.observations:
                explore(job)
            else:
                fresh.append(job)
        shares: dict[str, int] = {}
        bounding = user_shares(self.order)
        if bounding is not None:
            known, shares = bounding.order_and_shares(known, now, free)
        else:
            known = self.order.order(known, now)
        within = _within_shares(known, shares) if len(shares) > 1 else known
        counts = self.size.base(within, free)
        free -= sum(counts.values())
        for job in fresh:
            if not explore(job):
                break
        probing = dict(held)
        grown, held, devices = self._size_and_place(
            known, ordered, counts, free, shares, held, cluster, now
        )
        assignments, unplaced = self._assign(ordered, devices, held, workers)
        self.memory.kept.assignments = assignments
        final: Mapping[str, Assignment] = assignments
        turns: Mapping[str, Turn] = {}
        traffic: Mapping[str, Mapping[str, int]] = {}
        if self.share is not None or self.traffic is not None:
            in_order = [c.job for c in known]
            if exploring:  # (not a new list of every job: a reference to each is a write)
                in_order += exploring
            if self.share is not None:
                shared = self.share.share(assignments, in_order, cluster, now)
                final, turns = shared.assignments, shared.turns
                wake = _earliest(wake, shared.wake_at)
            if self.traffic is not None:
                traffic = self.traffic.ranks(final, in_order, now)
                wake = _earliest(wake, self.traffic.wake_at(traffic, now))
        notes = dict(grown.notes)
        for job_id, hold in probing.items():
            notes[job_id] = probing_note(workers[job_id], hold)
        plan = Plan(final, wake, SizingNotes(final, notes, grown.later), turns, traffic)
        return plan, unplaced

    def _size_and_place(
        self,
        known: Sequence[Candidate],
        ordered: Sequence[JobView],
        counts: Counts,
        free: int,
        shares: dict[str, int],
        held: Counts,
        cluster: ClusterView,
        now: float,
    ) -> tuple[Growth, Counts, Mapping[str, tuple[Device, ...]]]:
        """Every job's size, what each holds (``held``: the probes' holds) and its GPUs.

        On a cluster of several GPU types a ``TypedAllocator`` may choose type and
        count together, where the place stage is ``TypeAware``; its allotments are
        then laid out as allotted, not by the place stage, which could not know the
        types they were chosen for."""
        typed = None
        if (
            not held
            and len(shares) <= 1
            and isinstance(self.size, TypedAllocator)
            and isinstance(self.place, TypeAware)  # a type-blind or rack-bound twin opts out
        ):
            typed = self.size.allot_types(known, cluster, now)
        if typed is not None:
            grown = Growth({k: a.gpus for k, a in typed.allotments.items()}, dict(typed.notes))
        elif len(shares) > 1:
            grown = self._fair_growth(known, counts, free, shares)
        else:
            grown = self.size.grow(known, counts, free)
        if held:
            held.update(grown.counts)  # sized jobs are known, probing ones exploring: apart
        else:
            held = grown.counts  # nothing probes: no copy of every job's size
        if typed is not None:
            return grown, held, place_allotted(typed.allotments, ordered, cluster)
        return grown, held, self.place.place(held, ordered, cluster)

    def _assign(
        self,
        ordered: Sequence[JobView],
        devices: Mapping[str, tuple[Device, ...]],
        held: Counts,
        workers: Counts,
    ) -> tuple[dict[str, Assignment], set[str]]:
        """Each job's assignment from the GPUs the place stage gave it, and the jobs sized
        yet given none (to be sized again without them)."""
        unplaced: set[str] = set()
        assigning = self.memory.kept.start()
        at_most = getattr(self.place, "within_counts", False)
        """Whether the place stage gives a job at most its size (``Place.within_counts``)."""
        for job in ordered:
            mine = devices.get(job.id)
            if mine is None:
                assigning.put(job.id, None, 0)
                if held.get(job.id, 0):
                    unplaced.add(job.id)  # sized, yet the place stage found no GPUs
                continue
            # A place stage may give a job fewer GPUs than sized (``TypeAware`` keeps a
            # job that cannot grow without slowing down where it is): it runs on what
            # it got, up to its size (a probe's workers may hold more GPUs).
            probe = workers.get(job.id) if workers else None
            n = (len(mine) if at_most else held.get(job.id, 0)) if probe is None else probe
            assigning.put(job.id, mine, n if n <= len(mine) else len(mine))
        return assigning.done(ordered), unplaced

    def _fair_growth(
        self,
        known: Sequence[Candidate],
        counts: Counts,
        free: int,
        shares: dict[str, int],
    ) -> Growth:
        """Grow each user within their share, then start the jobs past it and grow anyone
        with what is left (``ringleader.policy.order.fairshare``)."""
        counts = dict(counts)
        by_user: dict[str, list[Candidate]] = {}
        for c in known:
            by_user.setdefault(c.job.user, []).append(c)
        for user, own in by_user.items():
            used = sum(counts.get(c.job.id, 0) for c in own)
            budget = min(free, shares.get(user, 0) - used)
            if budget <= 0:
                continue
            mine = {c.job.id: counts[c.job.id] for c in own if c.job.id in counts}
            grown = self.size.grow(own, mine, budget)
            added = sum(grown.counts.values()) - sum(mine.values())
            counts.update(grown.counts)
            free -= added
        late = self.size.base([c for c in known if c.job.id not in counts], free)
        counts.update(late)
        free -= sum(late.values())
        return self.size.grow(known, counts, free)


def _earliest(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


def _within_shares(ordered: Sequence[Candidate], shares: dict[str, int]) -> list[Candidate]:
    """The jobs of ``ordered`` that their users' shares can start, in order."""
    left = dict(shares)
    within: list[Candidate] = []
    for c in ordered:
        user, need = c.job.user, claim(c)
        if need <= left.get(user, 0):
            left[user] -= need
            within.append(c)
    return within
