"""The policy's output: the desired state of every job, for a body to carry out."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple, Protocol

from ringleader.policy.model.needs import Needs
from ringleader.policy.model.views import ClusterView, Device, JobView


class Assignment:
    """Where one job runs.

    ``devices`` are the GPUs the job holds; its ``workers`` run on the first
    ``workers`` of them. Holding more than it uses is how exploratory profiling
    keeps its largest probe size free while it measures the smaller ones.
    A job with no devices waits.

    ``suspended``: the job keeps its place on its GPUs but does not run this
    quantum (time-slicing); its state waits in host memory, so resuming it on
    the same GPUs costs a fraction of a second instead of a restart. Two
    running jobs may name the same GPU: they are packed onto it.

    A value like a frozen dataclass (equal and hashed by its fields, read-only
    when compiled), written out by hand as ``views.Observation`` is: Gandiva's
    stack makes one per resident job at every decision, and a frozen dataclass
    is built through ``object.__setattr__`` per field.
    """

    __slots__ = ("devices", "suspended", "workers")

    def __init__(
        self, devices: tuple[Device, ...] = (), workers: int = 0, suspended: bool = False
    ) -> None:
        if not 0 <= workers <= len(devices):
            raise ValueError(f"workers ({workers}) must be within 0..{len(devices)}")
        self.devices: Final = devices
        self.workers: Final = workers
        self.suspended: Final = suspended

    def _key(self) -> tuple[tuple[Device, ...], int, bool]:
        return (self.devices, self.workers, self.suspended)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Assignment):
            return NotImplemented
        return (
            self.workers == other.workers
            and self.suspended == other.suspended
            and self.devices == other.devices
        )

    def __ne__(self, other: object) -> bool:
        if not isinstance(other, Assignment):
            return NotImplemented
        return not self == other

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"Assignment(devices={self.devices!r}, workers={self.workers!r}, "
            f"suspended={self.suspended!r})"
        )

    def __reduce__(self) -> tuple[type[Assignment], tuple[tuple[Device, ...], int, bool]]:
        return (Assignment, self._key())

    @property
    def running(self) -> bool:
        return self.workers > 0 and not self.suspended

    @property
    def resident(self) -> bool:
        """Placed on GPUs, running or suspended."""
        return self.workers > 0

    @property
    def active_devices(self) -> tuple[Device, ...]:
        return self.devices[: self.workers]


WAIT = Assignment()

# Why a running job has the size it has (``Sizing.stop``).
FIXED = "fixed"
"""The policy gives each job a fixed size (or the job is not elastic): no growth weighed."""
AT_MAX = "at_max"
"""Growing further would pass the most the job may use (its max_gpus, or its quota)."""
NO_GAIN = "no_gain"
"""The next size would not cut the policy's objective at all."""
RESTART_NOT_WON = "restart_not_won"
"""The next size would save less than the resize's restart costs (``policy.payback``)."""
OUTBID = "outbid"
"""The next size would gain, but the GPUs left went to better steps or were too few."""
UNMEASURED = "unmeasured"
"""Not measured yet: held at its start size until it reports."""
NO_MODEL = "no_model"
"""No speed model to size it by: it runs at the size the allocator's base gave it."""
PROBING = "probing"
"""Exploratory profiling: running a probe size before the policy sizes it."""
GROWN_IDLE = "grown_idle"
"""Grown past its request onto idle GPUs while no job waits (grow-shrink)."""
ALLOTTED = "allotted"
"""Given its GPU type and count by an allocation solved over the whole cluster (Sia)."""


class Sizing(NamedTuple):
    """The policy's own account of why a running job has ``workers`` GPUs.

    Written by the allocator as it sizes the job, from its own numbers:
    ``stop`` says what ended the job's growth. Where a growth step was weighed
    and not taken, ``next_workers`` is the size it would have reached and
    ``before_s``/``after_s`` the allocator's objective at the two sizes:
    predicted remaining seconds, or seconds per epoch when ``per_epoch``.
    ``free`` is how many GPUs were left when the step was dropped, ``bar`` the
    smallest gain per added GPU among the steps the allocator did take
    (``OUTBID``); ``saved_s`` the remaining seconds the step would save
    against the job's restart (``RESTART_NOT_WON``); ``limit`` the most the
    policy may give the job (``AT_MAX``); ``held`` the GPUs a probe holds
    (``PROBING``). ``measured`` is false where the objective came from a
    guessed model (a job that has not reported yet).
    """

    stop: str
    workers: int
    next_workers: int | None = None
    before_s: float | None = None
    after_s: float | None = None
    per_epoch: bool = False
    free: int | None = None
    bar: float | None = None
    saved_s: float | None = None
    limit: int | None = None
    held: int | None = None
    measured: bool = True

    @property
    def gain_per_gpu(self) -> float | None:
        """The step's score as the greedy allocators rank it: objective saved per added GPU."""
        if self.next_workers is None or self.before_s is None or self.after_s is None:
            return None
        return (self.before_s - self.after_s) / (self.next_workers - self.workers)


Note = tuple[Any, ...]
"""A ``Sizing`` as a policy writes it (``note``): its fields in order, as a plain tuple."""


def note(
    stop: str,
    workers: int,
    *,
    next_workers: int | None = None,
    before_s: float | None = None,
    after_s: float | None = None,
    per_epoch: bool = False,
    free: int | None = None,
    bar: float | None = None,
    saved_s: float | None = None,
    limit: int | None = None,
    held: int | None = None,
    measured: bool = True,
) -> Note:
    """``Sizing(stop, workers, ...)`` as a plain tuple, the one place that knows its field
    order: a decision writes thousands, and ``SizingNotes`` makes a ``Sizing`` of only
    those someone reads (docs/scale.md, "The compiled hot path")."""
    return (
        stop,
        workers,
        next_workers,
        before_s,
        after_s,
        per_epoch,
        free,
        bar,
        saved_s,
        limit,
        held,
        measured,
    )


def scaled_objectives(written: Note, scale: float) -> Note:
    """``written`` with its ``before_s`` and ``after_s`` times ``scale`` (where it has them)."""
    if len(written) < 5 or written[3] is None:
        return written
    return (*written[:3], scale * written[3], scale * written[4], *written[5:])


def probing_note(workers: int, held: int) -> Note:
    """The note of a job running a probe of ``workers`` while it holds ``held`` GPUs."""
    return note(PROBING, workers, held=held)


class SizingNotes(Mapping[str, Sizing]):
    """``Plan.sizing`` as a policy hands it over: each running job's ``Sizing``, made
    when asked for.

    A policy decides thousands of times a simulated day and nobody reads most
    of its accounts, so it writes a plain ``Note`` only for the jobs whose size
    it weighed, and may leave some to ``later`` (called once, on the first
    look-up it did not answer); every other job running in ``assignments`` is
    ``FIXED`` at its workers. Pure: ``later`` computes from what the decision
    already fixed.
    """

    __slots__ = ("_assignments", "_later", "_notes")

    def __init__(
        self,
        assignments: Mapping[str, Assignment],
        notes: Mapping[str, Note],
        later: Callable[[], Mapping[str, Note]] | None = None,
    ) -> None:
        self._assignments = assignments
        self._notes = notes
        self._later = later

    def __getitem__(self, job_id: str) -> Sizing:
        if self._later is not None and job_id not in self._notes:
            self._notes = {**self._later(), **self._notes}
            self._later = None
        note = self._notes.get(job_id)
        if note is not None:
            return note if isinstance(note, Sizing) else Sizing(*note)
        a = self._assignments.get(job_id)
        if a is None or not a.running:
            raise KeyError(job_id)
        return Sizing(FIXED, a.workers)

    def __iter__(self) -> Iterator[str]:
        return (k for k, a in self._assignments.items() if a.running)

    def __len__(self) -> int:
        return sum(1 for a in self._assignments.values() if a.running)

    def __repr__(self) -> str:
        return f"SizingNotes({dict(self)!r})"


class Deferred(Mapping[str, "Turn"]):
    """``Plan.turns`` as a policy hands it over: computed on the first look-up.

    Pure like the decision it comes from: ``compute`` reads only what the
    decision already fixed. Most plans' turns are never read, and a cluster
    of time-sliced groups has hundreds to work out at every decision.
    """

    __slots__ = ("_compute", "_turns")

    def __init__(self, compute: Callable[[], dict[str, Turn]]) -> None:
        self._compute: Callable[[], dict[str, Turn]] | None = compute
        self._turns: dict[str, Turn] = {}

    def _all(self) -> dict[str, Turn]:
        if self._compute is not None:
            self._turns, self._compute = self._compute(), None
        return self._turns

    def __getitem__(self, job_id: str) -> Turn:
        return self._all()[job_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())

    def __repr__(self) -> str:
        return f"Deferred({self._all()!r})"


class Turn(NamedTuple):
    """When a time-sliced-out job is expected to run again, as the rotation stands.

    ``at`` is on the deciding body's clock (the ``now`` given to ``decide``);
    ``ahead`` jobs take their turns first, each a quantum of ``quantum_s``.
    Arrivals, priorities, migration and packing can change it.
    """

    at: float
    ahead: int
    quantum_s: float


@dataclass(frozen=True, slots=True)
class Plan:
    """Desired state of every job in the snapshot.

    ``wake_at``: the latest time the policy wants to be asked again (e.g. when
    a profiling probe should have finished), or ``None``.

    ``sizing`` and ``turns`` are the policy's account of the plan, for people:
    why each running job has its size, and when each time-sliced-out job
    should run next. Bodies carry out ``assignments``, and ``traffic`` where
    they can shape a NIC.

    ``traffic``: per node, the priority rank (0 first) of each running job
    whose parameter server sends from that node, where two or more do
    (TensorLights; ``ringleader.policy.traffic``). Empty: no priorities.
    """

    assignments: Mapping[str, Assignment]
    wake_at: float | None = None
    sizing: Mapping[str, Sizing] = field(default_factory=dict)
    turns: Mapping[str, Turn] = field(default_factory=dict)
    traffic: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    settled: bool = False
    """The plan reads nothing the clock moves on (the time, progress, measured seconds):
    asked again about the same jobs where they are now, before ``wake_at``, the policy
    gives the same plan. So where a plan moved nobody and nothing arrived or ended
    since, a simulator need not ask again at a round tick (``sim.engine``). False:
    time alone may change it (attained service past a threshold, the work left
    rescaling a size, a quantum's end)."""

    def of(self, job_id: str) -> Assignment:
        return self.assignments.get(job_id, WAIT)

    @property
    def busy_gpus(self) -> int:
        """GPUs on which some job runs now (a packed GPU counts once)."""
        # (node, index) keys: tuples hash in C, Devices through Python (10k-job runs).
        return len(
            {
                (d.node, d.index)
                for a in self.assignments.values()
                if a.running
                for d in a.active_devices
            }
        )

    @property
    def held_gpus(self) -> int:
        """GPUs some job holds, running, suspended or reserved."""
        return len({(d.node, d.index) for a in self.assignments.values() for d in a.devices})


class Decider(Protocol):
    """What a body (simulator or runtime) calls: a pure function of the snapshot.

    Its output depends on the snapshot alone, but a stage may keep what it worked
    out last time to find the same answer sooner (``LastCandidates``,
    ``keeping.LastKept``): one policy object decides for one body at a time.
    """

    @property
    def name(self) -> str: ...

    @property
    def needs(self) -> Needs:
        """What the policy relies on a body to supply (see ``ringleader.policy.model.needs``)."""
        ...

    def decide(self, jobs: Sequence[JobView], cluster: ClusterView, now: float) -> Plan: ...
