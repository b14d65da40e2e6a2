"""A policy: order → profile → allocate → place, as one pure function of a snapshot.

``Policy.decide(jobs, cluster, now) -> Plan`` is the only thing the simulator
and the runtime call. With exploratory profiling, GPUs are claimed in this
order, which is the explore/optimise trade-off the seed describes:

1. explorations already under way keep the GPUs they hold;
2. every profiled job gets its minimum (FIFO);
3. new explorations start, in FIFO order, while their largest probe size fits;
4. the allocator grows profiled jobs with what is left, never a running job
   past its size where the restart would not be won back
   (``ringleader.policy.payback``).

Under light load step 3 almost always succeeds and exploration costs only the
probes; under heavy load new jobs wait behind the profiled ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ringleader.policy.allocator import Allocator, Counts
from ringleader.policy.needs import Needs
from ringleader.policy.objective import Candidate
from ringleader.policy.placement import place
from ringleader.policy.plan import PROBING, Assignment, Plan, Sizing, SizingNotes
from ringleader.policy.profiling import Exploratory, Precompute, Profiling
from ringleader.policy.views import ClusterView, JobView


def fifo(jobs: Sequence[JobView]) -> list[JobView]:
    """Submission order, ties broken by id so the order is total and repeatable."""
    return sorted(jobs, key=lambda j: (j.submitted_at, j.id))


@dataclass(frozen=True, slots=True)
class Policy:
    name: str
    allocator: Allocator
    profiling: Profiling = field(default_factory=Precompute)

    @property
    def needs(self) -> Needs:
        speed = self.allocator.needs_speed
        return Needs(
            true_model=speed and isinstance(self.profiling, Precompute),
            true_remaining=self.allocator.needs_true_remaining,
            speed_model=speed,
            profiling=speed and isinstance(self.profiling, Exploratory),
        )

    def decide(self, jobs: Sequence[JobView], cluster: ClusterView, now: float) -> Plan:
        ordered = fifo(jobs)
        if self.allocator.needs_speed:
            known, exploring = self.profiling.split(ordered)
        else:
            known, exploring = [Candidate(job, None) for job in ordered], []
        free = cluster.capacity
        held: Counts = {}
        workers: Counts = {}
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
        counts = self.allocator.base(known, free)
        free -= sum(counts.values())
        for job in fresh:
            if not explore(job):
                break
        probing = dict(held)
        grown = self.allocator.grow(known, counts, free)
        for job_id, n in grown.counts.items():
            held[job_id] = n
            workers[job_id] = n
        devices = place(held, ordered, cluster)
        assignments = {
            job.id: Assignment(devices.get(job.id, ()), workers.get(job.id, 0)) for job in ordered
        }
        notes = grown.notes
        for job_id, hold in probing.items():
            notes[job_id] = Sizing(PROBING, workers[job_id], held=hold)
        return Plan(assignments, wake, SizingNotes(assignments, notes, grown.later))
