"""The policy's view of one job, built the same way by every body.

Both bodies know a job's submitted facts, what it reported, and what it
holds; only the simulator also knows the truth. ``job_view`` is the one place
these become a ``JobView``, so the two bodies cannot drift apart on:

* **truth**: a true speed model reaches the policy only when the policy says
  it is given one (``Needs.true_model``), never an online learner;
* **size bounds**: ``max_gpus`` never exceeds the cluster;
* **placement**: a job placed in a time-sliced group but not started there
  keeps its place in the next view (suspended, on its group's GPUs);
* **one set of step times per view**: a body may hand over the view it built
  last time while only the job's progress, its placement and how long it has
  run at each size change (``progress_view``, ``placement_view``; the
  observations mapping may be shared, and its seconds only grow), but a step time
  or batch that changes, or a size measured for the first time, comes in a
  new view object. Stages keep what they worked out from a view's step times
  for as long as they get the same object (``LastCandidates``), and a view
  once profiled by its seconds stays profiled (``Exploratory.split``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from ringleader.perf.epochs import EpochsToConverge
from ringleader.perf.gradient import GradientReport
from ringleader.perf.speed import SpeedModel
from ringleader.policy.model.needs import Needs
from ringleader.policy.model.plan import Assignment
from ringleader.policy.model.views import Device, JobShape, JobView, Observation
from ringleader.spine.actions import Held
from ringleader.spine.kin import NO_KIN

UNREPORTED = JobShape(examples_per_epoch=1, batch_per_worker=1, grad_bytes=1e7)
"""A job's shape before its first progress line says it: what the runtime tells the
policy of a job that has not run, and the simulator of one it plays as the runtime
learns it (``SimJob.shape_told``)."""
NO_SPEEDS: Mapping[str, float] = MappingProxyType({})
NO_MODELS: Mapping[str, SpeedModel] = MappingProxyType({})
"""One shared empty ``type_speed``: most jobs on most clusters have none."""


@dataclass(frozen=True, slots=True)
class Submitted:
    """What the job's owner said when submitting it."""

    id: str
    submitted_at: float
    min_gpus: int
    max_gpus: int
    requested_gpus: int
    elastic: bool
    user: str = ""
    gpu_types: tuple[str, ...] = ()
    parameter_server: bool = False


@dataclass(slots=True)
class Known:
    """What a body has learned of the job so far (built afresh for every view, so not
    frozen: a frozen dataclass costs a ``setattr`` per field, a million times a run)."""

    shape: JobShape
    epochs: EpochsToConverge
    remaining_fraction: float
    observations: Mapping[int, Observation]
    packed: Mapping[str, Observation]
    attained_gpu_s: float
    state_since: float
    priority: int = 0
    memory_gib: float | None = None
    restart_s: float = 0.0
    """What a checkpoint-stop-restart of this job costs (0: unknown)."""
    type_speed: Mapping[str, float] | None = None
    """Its speed on each GPU type relative to its observations (None: types not known)."""
    attained_effective_s: float | None = None
    """Attained service weighted by the speed of the types held (None: not weighed)."""
    gradient: GradientReport | None = None
    """The gradient statistics it last reported, where it adapts its batch."""
    kin: Mapping[int, Observation] = field(default_factory=lambda: NO_KIN)
    """Step times other jobs of its model measured (``spine.kin``), where it reports its
    gradient."""


def job_view(
    job: Submitted,
    known: Known,
    held: Held,
    placed: Assignment | None,
    *,
    capacity: int,
    needs: Needs,
    truth: SpeedModel | None = None,
    type_truths: Mapping[str, SpeedModel] | None = None,
) -> JobView:
    """The ``JobView`` of one job; ``placed`` is its assignment in the last plan carried out.
    ``truth`` and ``type_truths`` (per GPU type) reach it where ``needs.true_model``."""
    devices, workers, suspended = _placement(held, placed)
    max_gpus = min(job.max_gpus, capacity)
    speed = truth if needs.true_model else None
    type_models = (type_truths or NO_MODELS) if needs.true_model else NO_MODELS
    type_speed = known.type_speed or NO_SPEEDS
    if _NATIVE:
        return _stored(
            job, known, devices, workers, suspended, max_gpus, speed, type_speed, type_models
        )
    return JobView(
        id=job.id,
        submitted_at=job.submitted_at,
        shape=known.shape,
        epochs=known.epochs,
        remaining_fraction=known.remaining_fraction,
        min_gpus=job.min_gpus,
        max_gpus=max_gpus,
        requested_gpus=job.requested_gpus,
        elastic=job.elastic,
        priority=known.priority,
        devices=devices,
        workers=workers,
        speed=speed,
        observations=known.observations,
        attained_gpu_s=known.attained_gpu_s,
        suspended=suspended,
        state_since=known.state_since,
        packed=known.packed,
        memory_gib=known.memory_gib,
        restart_s=known.restart_s,
        user=job.user,
        gpu_types=job.gpu_types,
        parameter_server=job.parameter_server,
        type_speed=type_speed,
        type_models=type_models,
        gradient=known.gradient,
        attained_effective_s=known.attained_effective_s,
        kin=known.kin,
    )


def _stored(
    job: Submitted,
    known: Known,
    devices: tuple[Device, ...],
    workers: int,
    suspended: bool,
    max_gpus: int,
    speed: SpeedModel | None,
    type_speed: Mapping[str, float],
    type_models: Mapping[str, SpeedModel],
) -> JobView:
    """``job_view``'s ``JobView``, compiled: made empty and each field stored.

    A frozen dataclass's ``__init__`` is the dataclass module's, interpreted even
    compiled, and sets each of the 28 fields through ``object.__setattr__``; a store
    from this module is a plain store (``_NATIVE``; docs/scale.md, "Views the bodies
    keep, and the memo on each view"). Every field is stored here (``test_spine``
    checks the list against the class).
    """
    view = JobView.__new__(JobView)
    view.id = job.id  # type: ignore[misc]
    view.submitted_at = job.submitted_at  # type: ignore[misc]
    view.shape = known.shape  # type: ignore[misc]
    view.epochs = known.epochs  # type: ignore[misc]
    view.remaining_fraction = known.remaining_fraction  # type: ignore[misc]
    view.min_gpus = job.min_gpus  # type: ignore[misc]
    view.max_gpus = max_gpus  # type: ignore[misc]
    view.requested_gpus = job.requested_gpus  # type: ignore[misc]
    view.elastic = job.elastic  # type: ignore[misc]
    view.priority = known.priority  # type: ignore[misc]
    view.devices = devices  # type: ignore[misc]
    view.workers = workers  # type: ignore[misc]
    view.speed = speed  # type: ignore[misc]
    view.observations = known.observations  # type: ignore[misc]
    view.attained_gpu_s = known.attained_gpu_s  # type: ignore[misc]
    view.suspended = suspended  # type: ignore[misc]
    view.state_since = known.state_since  # type: ignore[misc]
    view.packed = known.packed  # type: ignore[misc]
    view.memory_gib = known.memory_gib  # type: ignore[misc]
    view.restart_s = known.restart_s  # type: ignore[misc]
    view.user = job.user  # type: ignore[misc]
    view.gpu_types = job.gpu_types  # type: ignore[misc]
    view.parameter_server = job.parameter_server  # type: ignore[misc]
    view.type_speed = type_speed  # type: ignore[misc]
    view.type_models = type_models  # type: ignore[misc]
    view.gradient = known.gradient  # type: ignore[misc]
    view.attained_effective_s = known.attained_effective_s  # type: ignore[misc]
    view.kin = known.kin  # type: ignore[misc]
    view.memo = None  # type: ignore[misc]
    return view


def held_on(held: Held, nodes: Mapping[str, object]) -> Held:
    """``held`` as the policy may see it on a cluster of ``nodes`` (by name): a job
    with a device on a node the cluster no longer lists (its node stopped answering,
    or left) holds nothing. Its gang cannot go on without that node, so the policy
    places it afresh, and the body stops what is left of it."""
    devices = held.devices
    if not devices or all(d.node in nodes for d in devices):
        return held
    return Held(last=held.last)


def _placement(held: Held, placed: Assignment | None) -> tuple[tuple[Device, ...], int, bool]:
    """The devices, workers and suspended a view shows for what is ``held`` and ``placed``."""
    devices, workers, suspended = held.devices, len(held.devices), held.suspended
    if placed is not None and placed.workers:
        active = placed.devices[: placed.workers]
        if active == devices or (devices and set(active) == set(devices)):
            # Carried out as planned: the plan's own devices, extra held ones included.
            return placed.devices, placed.workers, placed.suspended
        if not devices and placed.suspended:
            # Placed in a time-sliced group, not started there yet: keep its place.
            return placed.devices, placed.workers, True
    return devices, workers, suspended


_set = object.__setattr__
_NATIVE = not __file__.endswith(".py")
"""Compiled (``make compiled``): a store to a view's field from this module is a
plain store into the object, which the frozen class's ``__setattr__`` guards
only against outside code; in pure Python it must go through
``object.__setattr__``, a type lookup per field."""


def placement_view(
    view: JobView, held: Held, placed: Assignment | None, state_since: float
) -> None:
    """Move ``view`` to where its job is now, in place, as ``job_view`` would show it.

    A plan carried out changes, of a job's view, only where it runs and since
    when (``devices``, ``workers``, ``suspended``, ``state_since``): at every
    quantum boundary a time-slicing policy suspends and resumes jobs by the
    dozen, and this spares building each one's view again. The body's progress
    figures are moved on apart
    (``progress_view``). As there, only the body that built ``view`` calls
    this, between decisions.
    """
    devices, workers, suspended = _placement(held, placed)
    if _NATIVE:
        view.devices = devices  # type: ignore[misc]
        view.workers = workers  # type: ignore[misc]
        view.suspended = suspended  # type: ignore[misc]
        view.state_since = state_since  # type: ignore[misc]
        return
    if devices is not view.devices:
        _set(view, "devices", devices)
    if workers != view.workers:
        _set(view, "workers", workers)
    if suspended is not view.suspended:
        _set(view, "suspended", suspended)
    if state_since != view.state_since:
        _set(view, "state_since", state_since)


def progress_view(
    view: JobView,
    remaining_fraction: float,
    attained_gpu_s: float,
    attained_effective_s: float | None,
) -> None:
    """Move a running job's ``view`` on to its progress now, in place.

    Between two events a running job changes only in these three figures (its
    observations are shared mappings, already current: only their seconds, as
    a new step time comes in a new view), so a body may update the view it
    built instead of building all 28 fields again for every running job at
    every event. Only the body that built ``view`` calls this, and only
    between decisions; a policy sees a frozen view. A stage that keeps what it
    worked
    out from a view must not take the same object for the same progress:
    ``policy.profiling.LastCandidates`` keeps a candidate, which reads progress
    from the view when asked, for the very view it was made from;
    the plan's lazy notes (``SizingNotes.later``) read it when first asked, so
    a body that wants them as of the decision asks before the next event.
    """
    if _NATIVE:
        view.remaining_fraction = remaining_fraction  # type: ignore[misc]
        view.attained_gpu_s = attained_gpu_s  # type: ignore[misc]
        view.attained_effective_s = attained_effective_s  # type: ignore[misc]
        return
    _set(view, "remaining_fraction", remaining_fraction)
    _set(view, "attained_gpu_s", attained_gpu_s)
    if attained_effective_s is not view.attained_effective_s:  # None, unless typed speeds
        _set(view, "attained_effective_s", attained_effective_s)
