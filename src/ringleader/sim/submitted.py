"""A job as submitted to the simulator (``SimJob``): what it asks for, and its true behaviour.

What the engine keeps of it while it runs is ``sim.jobs.JobState``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ringleader.sim.profiles import TrueProfile
from ringleader.spine.batching import BatchBounds


@dataclass(frozen=True, slots=True)
class SimJob:
    """A job as submitted to the simulator, with its true behaviour."""

    id: str
    submitted_at: float
    profile: TrueProfile
    max_gpus: int = 8
    min_gpus: int = 1
    requested_gpus: int = 1
    elastic: bool = True
    work_scale: float = 1.0
    """This job needs ``work_scale`` times the epochs of its profile."""
    kind: str | None = None
    """Job type for the contention model (e.g. a Gavel job type); None: no contention."""
    minibatches: int | None = None
    """Minibatches in the whole job, when known: then time to the first 100 is tracked."""
    priority: int = 0
    memory_gib: float | None = None
    startup_s: float | None = None
    """Launch to first minibatch of the job's first start; None: the simulator's restart delay."""
    restart_s: float | None = None
    """Stop to first minibatch of a later start; None: the simulator's restart delay."""
    user: str = ""
    """Who submitted it (fair share between users); "" for one anonymous user."""
    type_speed: Mapping[str, float] | None = None
    """True speed on each GPU type relative to ``profile`` (a type not named: 1.0). The
    policy is told it (the scenario's measured table, like a workload file's step times)."""
    gpu_types: tuple[str, ...] = ()
    """The GPU types the job may run on (empty: any)."""
    type_profiles: Mapping[str, TrueProfile] | None = None
    """The job's true profile on each type it was measured on, ``profile`` the first's:
    then its speed on a type is that table's at its placement (``sim.typed``), and
    ``type_speed`` only what a policy is told."""
    comm_share: float = 0.0
    """The share of its step spent synchronising across nodes within one rack: what grows
    when it spans racks (``sim.topology``); 0: it does not care where it runs."""
    batch: BatchBounds | None = None
    """Where the job takes the batch it is handed at each launch, the bounds it takes it
    within (``spine.batching``; its profile's ``launched`` says what that batch does);
    None: the profile says what batch it takes."""
    shape_told: bool = True
    """The policy is told the profile's shape from submission (a workload file states it);
    False: from the job's first minibatch on, as the runtime learns it from the job's
    first progress line (``spine.views.UNREPORTED`` before): a replay of a real run."""
