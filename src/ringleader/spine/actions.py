"""From a Plan to actions: the one place a plan is diffed against what runs.

A body describes each job by what it *holds* now: the devices its processes
run on (or sit suspended on, in host memory), or nothing when no process of
the job exists. ``diff`` compares that with the Plan and says, per job, what
must happen for the plan to hold:

* ``Stop`` — its processes checkpoint and exit: the plan preempts it, moves it
  to other GPUs (``migrate``), or runs it at another size (``resize``);
* ``Launch`` — start its processes on the target's devices, classified by
  ``launch_kind`` as a start, a resize, a migration or a restart;
* ``Suspend`` / ``Resume`` — time-slicing on the same devices.

A resize is a ``Stop`` and a ``Launch`` in one diff. The simulator applies both
at once and charges the restart; the runtime applies the stop at once and the
launch once the old generation has exited and the GPUs are free. Neither
decides anything: sizes, places and turns come from the plan.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from ringleader.policy.model.plan import Plan
from ringleader.policy.model.views import Device

HELD_NOTHING: tuple[Device, ...] = ()


class Held:
    """What one job holds now, as a body knows it.

    ``devices``: where the job's live processes run or are suspended; empty
    when none exists (queued, stopped, or placed in a time-sliced group but
    never started there). ``last``: the devices of its latest launch, even
    after it stopped, so the next launch can be classified.

    A value like a frozen dataclass (equal and hashed by its fields, read-only
    when compiled), written out by hand as ``plan.Assignment`` is: the simulator
    makes one at every change of every job's place (docs/scale.md, "The compiled
    hot path").
    """

    __slots__ = ("devices", "last", "suspended")

    def __init__(
        self,
        devices: tuple[Device, ...] = HELD_NOTHING,
        suspended: bool = False,
        last: tuple[Device, ...] | None = None,
    ) -> None:
        self.devices: Final = devices
        self.suspended: Final = suspended
        self.last: Final = last

    def _key(self) -> tuple[tuple[Device, ...], bool, tuple[Device, ...] | None]:
        return (self.devices, self.suspended, self.last)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Held):
            return NotImplemented
        return self._key() == other._key()

    def __ne__(self, other: object) -> bool:
        if not isinstance(other, Held):
            return NotImplemented
        return not self == other

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"Held(devices={self.devices!r}, suspended={self.suspended!r}, last={self.last!r})"

    def __reduce__(
        self,
    ) -> tuple[type[Held], tuple[tuple[Device, ...], bool, tuple[Device, ...] | None]]:
        return (Held, self._key())


class Why(StrEnum):
    """Why a job's processes are stopped."""

    PREEMPT = "preempt"
    RESIZE = "resize"
    MIGRATE = "migrate"
    REBATCH = "rebatch"
    """Kept where it runs, relaunched there for a better batch (``spine.batching``)."""


class Kind(StrEnum):
    """The counted events. Every body counts these and only these."""

    START = "start"
    """First launch of the job."""
    RESIZE = "resize"
    """A launch at another worker count than the job's previous launch."""
    MIGRATION = "migration"
    """A launch at the same worker count on other devices."""
    RESTART = "restart"
    """A launch on the very devices of the previous one (after a preemption, a failure or
    a stop for a better batch)."""
    SUSPEND = "suspend"
    RESUME = "resume"


class _Action:
    """An action as a value: equal and hashed by its class and fields, read-only compiled,
    like the frozen dataclasses these were. Written out by hand as ``Held`` is: the
    simulator makes one per suspend and resume of a time-sliced job."""

    __slots__ = ()

    def _key(self) -> tuple[object, ...]:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self) or not isinstance(other, _Action):
            return NotImplemented
        return self._key() == other._key()

    def __ne__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return not self == other

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._key()))

    def __reduce__(self) -> tuple[type[_Action], tuple[object, ...]]:
        return (type(self), self._key())


class Stop(_Action):
    """The job's processes checkpoint and exit, for ``why``."""

    __slots__ = ("job", "why")

    def __init__(self, job: str, why: Why) -> None:
        self.job: Final = job
        self.why: Final = why

    def _key(self) -> tuple[object, ...]:
        return (self.job, self.why)

    def __repr__(self) -> str:
        return f"Stop(job={self.job!r}, why={self.why!r})"


class Launch(_Action):
    """Start the job's processes on ``devices``; ``kind``: what the launch counts as."""

    __slots__ = ("devices", "job", "kind")

    def __init__(self, job: str, devices: tuple[Device, ...], kind: Kind) -> None:
        self.job: Final = job
        self.devices: Final = devices
        self.kind: Final = kind

    def _key(self) -> tuple[object, ...]:
        return (self.job, self.devices, self.kind)

    def __repr__(self) -> str:
        return f"Launch(job={self.job!r}, devices={self.devices!r}, kind={self.kind!r})"


class _OneJob(_Action):
    """An action that names only its job (``Suspend``, ``Resume``)."""

    __slots__ = ("job",)

    def __init__(self, job: str) -> None:
        self.job: Final = job

    def _key(self) -> tuple[object, ...]:
        return (self.job,)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(job={self.job!r})"


class Suspend(_OneJob):
    """Time-slicing: the job's processes pause where they are, in host memory."""

    __slots__ = ()


class Resume(_OneJob):
    """Time-slicing: the job's suspended processes run on again on the same devices."""

    __slots__ = ()


Action = Stop | Launch | Suspend | Resume


def launch_kind(last: tuple[Device, ...] | None, devices: tuple[Device, ...]) -> Kind:
    """What a launch on ``devices`` counts as, after a previous launch on ``last``."""
    if last is None:
        return Kind.START
    if len(last) != len(devices):
        return Kind.RESIZE
    if set(last) != set(devices):
        return Kind.MIGRATION
    return Kind.RESTART


def diff_one(job: str, held: Held, plan: Plan, rebatch: bool = False) -> list[Action]:
    """The actions that take one job from what it holds to its place in ``plan``;
    ``rebatch``: a job the plan keeps running where it runs is relaunched there."""
    target = plan.of(job)
    wanted = target.active_devices
    out: list[Action] = []
    devices = held.devices
    if rebatch and devices and devices == wanted and not held.suspended and target.running:
        return [Stop(job, Why.REBATCH), Launch(job, wanted, Kind.RESTART)]
    if devices and wanted != devices:
        if not target.resident:
            why = Why.PREEMPT
        elif len(wanted) != len(devices):
            why = Why.RESIZE
        else:
            why = Why.MIGRATE
        out.append(Stop(job, why))
        devices = HELD_NOTHING
    if not devices:
        if target.running:
            out.append(Launch(job, wanted, launch_kind(held.last, wanted)))
    elif held.suspended and target.running:
        out.append(Resume(job))
    elif not held.suspended and target.suspended:
        out.append(Suspend(job))
    return out


def diff(held: Mapping[str, Held], plan: Plan) -> list[Action]:
    """Every job's actions, jobs in the order of ``held``."""
    return [action for job, h in held.items() for action in diff_one(job, h, plan)]


@dataclass(slots=True)
class EventCounts:
    """How often each counted event happened to one job (or to a whole run)."""

    events: dict[Kind, int] = field(default_factory=dict)

    def add(self, kind: Kind, n: int = 1) -> None:
        self.events[kind] = self.events.get(kind, 0) + n

    def __getitem__(self, kind: Kind) -> int:
        return self.events.get(kind, 0)

    @property
    def resizes(self) -> int:
        return self[Kind.RESIZE]

    def as_dict(self) -> dict[str, int]:
        return {k.value: self.events[k] for k in Kind if self.events.get(k)}

    @classmethod
    def of(cls, kinds: Iterable[Kind]) -> EventCounts:
        counts = cls()
        for kind in kinds:
            counts.add(kind)
        return counts


def counted(action: Action) -> Kind | None:
    """The counted event an applied action is, if any (a stop counts at its relaunch)."""
    if isinstance(action, Launch):
        return action.kind
    if isinstance(action, Suspend):
        return Kind.SUSPEND
    if isinstance(action, Resume):
        return Kind.RESUME
    return None
