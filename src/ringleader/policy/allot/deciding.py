"""``Allotting``: a policy whose allot stage picks each job's type and count at once.

The decision is the allot stage's (``stage.Allot``); what is left here is to lay
each allotment out. A running job allotted the type it holds keeps its GPUs
(a subset, where it shrinks), as ``FewestNodes`` keeps them: a move costs a
checkpoint-stop-restart. The rest are placed largest first on the fewest
nodes of their type; where the free GPUs of a type are split over nodes other
jobs keep, a job spans more nodes than it would on an empty type (Sia evicts
the jobs in the way instead, which its simulator does not charge for).

The stage decides again every ``round_s`` (``Plan.wake_at``), as its paper's
rounds do; a body asks sooner when jobs arrive or end.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ringleader.policy.allot.stage import Allot, Allotment
from ringleader.policy.model.arrival import fifo
from ringleader.policy.model.memory import Memory
from ringleader.policy.model.needs import Needs
from ringleader.policy.model.objective import Candidate
from ringleader.policy.model.plan import WAIT, Assignment, Plan, SizingNotes
from ringleader.policy.model.views import ClusterView, Device, JobView
from ringleader.policy.place.fewest_nodes import FreeGPUs, PlacementError, keep_held, place_one
from ringleader.policy.profile.sources import Precompute


@dataclass(frozen=True, slots=True)
class Allotting:
    """A named policy of one allot stage; where the stage reads speed models, they are
    known on arrival (``Precompute``)."""

    name: str
    allot: Allot
    profiling: Precompute = field(default_factory=Precompute)

    @property
    def needs(self) -> Needs:
        speed = self.allot.needs_speed
        return Needs(
            true_model=speed,
            true_remaining=self.allot.needs_true_remaining,
            speed_model=speed,
        )

    def memories(self) -> dict[str, Memory[Any]]:
        """What the policy keeps between decisions (``model.memory``): its candidates."""
        found: dict[str, Memory[Any]] = {"profiling": self.profiling.memory}
        memory = getattr(self.allot, "memory", None)
        if isinstance(memory, Memory):
            found["allot"] = memory
        return found

    def forget(self) -> None:
        for memory in self.memories().values():
            memory.forget()

    def decide(self, jobs: Sequence[JobView], cluster: ClusterView, now: float) -> Plan:
        ordered = fifo(jobs)
        if self.allot.needs_speed:
            known, _ = self.profiling.split(ordered, cluster)
        else:
            known = [Candidate(job, None) for job in ordered]
        allotted = self.allot.allot(known, cluster, now)
        placed = place_allotted(allotted.allotments, ordered, cluster)
        assignments: dict[str, Assignment] = {}
        for job in ordered:
            devices = placed.get(job.id)
            assignments[job.id] = Assignment(devices, len(devices)) if devices else WAIT
        notes = {k: v for k, v in allotted.notes.items() if k in placed}
        wake = (math.floor(now / self.allot.round_s) + 1) * self.allot.round_s
        return Plan(assignments, wake, SizingNotes(assignments, notes))


def place_allotted(
    allotments: Mapping[str, Allotment], jobs: Sequence[JobView], cluster: ClusterView
) -> dict[str, tuple[Device, ...]]:
    """Devices for each allotted job (this module's docstring); a job left out waits."""
    free = FreeGPUs(cluster)
    staying: dict[str, int] = {}
    for job in jobs:
        allotment = allotments.get(job.id)
        if allotment is not None and job.devices and _all_of(job, allotment.gpu_type, cluster):
            staying[job.id] = allotment.gpus
    placed, moving = keep_held(staying, [j for j in jobs if j.id in staying], free)
    moving += [j for j in jobs if j.id in allotments and j.id not in staying]
    moving.sort(key=lambda j: (-allotments[j.id].gpus, j.submitted_at, j.id))
    for job in moving:
        allotment = allotments[job.id]
        try:
            placed[job.id] = place_one(job, allotment.gpus, free, (allotment.gpu_type,))
        except PlacementError:
            continue  # allotted past its type's free GPUs: it waits
    return placed


def _all_of(job: JobView, gpu_type: str, cluster: ClusterView) -> bool:
    types = cluster.node_types
    return all(types[d.node] == gpu_type for d in job.devices)
