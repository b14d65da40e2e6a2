"""Carrying out a Plan: the effects each body implements, and the one dispatch over actions.

``actions.diff_one`` says what must happen to a job; ``carry_out`` hands each
of those actions to the body's ``Effects``, so no body looks at action types:

* ``launch`` — start the job's processes on ``devices``; ``kind`` is the counted
  event (a start, a resize, a migration, a restart);
* ``stop`` — its processes checkpoint and exit, for ``why``;
* ``suspend`` / ``resume`` — time-slicing, on the same devices.

A migration is no effect of its own: it is a ``stop`` for ``Why.MIGRATE``
followed by a ``launch`` of kind ``Kind.MIGRATION`` on the other devices, as a
resize is a stop and a launch at another size. A body whose stop takes time
(``stops_at_once`` false: the runtime's processes checkpoint, then exit) gets
only the stop; the job's next diff, once it holds nothing, brings the launch.
The simulator stops at once and gets both.

The Plan's traffic ranks (``Plan.traffic``) are no job's action: the runtime
shapes its NIC to them each tick (``runtime.acting.Acting.shape``), and the
simulator plays no NIC (TensorLights' effect on speed is its contention model).
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from ringleader.policy.model.plan import Assignment, Plan
from ringleader.policy.model.views import Device
from ringleader.spine.actions import Held, Kind, Launch, Resume, Stop, Suspend, Why, diff_one

J = TypeVar("J", contravariant=True)
"""The body's own record of a job (the simulator's ``JobState``, the runtime's ``JobRow``)."""


class Effects(Protocol[J]):
    """What a body does for each action; ``stops_at_once``: see the module docstring."""

    @property
    def stops_at_once(self) -> bool: ...

    def launch(self, job: J, devices: tuple[Device, ...], kind: Kind) -> None: ...

    def stop(self, job: J, why: Why) -> None: ...

    def suspend(self, job: J) -> None: ...

    def resume(self, job: J) -> None: ...


def carry_out(
    job: J, job_id: str, held: Held, plan: Plan, effects: Effects[J], rebatch: bool = False
) -> None:
    """Take ``job`` (``job_id``, holding ``held``) to its place in ``plan`` through
    ``effects``; ``rebatch``: relaunch it where it runs (``spine.batching.rebatched``)."""
    for action in diff_one(job_id, held, plan, rebatch):
        if isinstance(action, Stop):
            effects.stop(job, action.why)
            if not effects.stops_at_once:
                return
        elif isinstance(action, Launch):
            effects.launch(job, action.devices, action.kind)
        elif isinstance(action, Suspend):
            effects.suspend(job)
        elif isinstance(action, Resume):
            effects.resume(job)


def unchanged(target: Assignment, carried: Assignment) -> bool:
    """Whether ``target`` is the assignment last carried out for the job: its diff is empty.

    A rule only for a body in which nothing but a carried-out Plan changes what
    a job holds (the simulator, where a job that ends leaves the body): there a
    job whose target stands needs no diff. The runtime diffs every job at every
    tick, since its processes exit, fail and are settled on their own.
    """
    return target is carried or target == carried
