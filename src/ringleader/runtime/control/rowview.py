"""A stored job row as the spine sees it: what it holds, and its ``JobView``.

The runtime's half of observing: the simulator builds the same ``JobView``
from its own state with the same ``spine.views.job_view``. Everything here
is a pure function of the row, the cluster and the last plan's target.
"""

from __future__ import annotations

from collections.abc import Mapping

from ringleader.perf.epochs import EpochsToConverge
from ringleader.policy.model.needs import Needs
from ringleader.policy.model.plan import Assignment
from ringleader.policy.model.views import ClusterView, Device, JobShape, JobView, Observation
from ringleader.runtime.control.progress import RESTART, profile
from ringleader.runtime.state.queries import PageQuery
from ringleader.runtime.state.rows import JobRow, State, gradient
from ringleader.runtime.state.spec import Arch
from ringleader.runtime.state.store import Store
from ringleader.runtime.workers.gpus import EFFECTIVE, measured_speeds, observations_in_best_terms
from ringleader.spine.actions import Held
from ringleader.spine.kin import NO_KIN, KinBook
from ringleader.spine.views import UNREPORTED, Known, Submitted, held_on, job_view


def held(row: JobRow) -> Held:
    """What the job holds, for the spine: devices while its processes live."""
    last = tuple(Device(n, i) for n, i in row.last_devices) or None
    if last is None and row.last_workers:
        # A row from before last_devices was kept: its size is all we know.
        last = tuple(Device("?", i) for i in range(row.last_workers))
    if row.state not in (State.RUNNING, State.SUSPENDED):
        return Held(last=last)
    devices = tuple(Device(n, i) for n, i in row.devices)
    return Held(devices, row.state is State.SUSPENDED, last)


def row_view(
    row: JobRow,
    cluster: ClusterView,
    target: Assignment | None,
    *,
    needs: Needs,
    restart_s: float,
    book: KinBook | None = None,
) -> JobView:
    """``row`` as the policy sees it; ``target``: its assignment in the last plan carried
    out; ``restart_s``: the restart cost assumed until the job's own is measured;
    ``book``: its kin's step times, kept up to date with its own (None: no kin)."""
    spec, shape = row.spec, row.shape
    typed = cluster.heterogeneous
    speeds = measured_speeds(cluster, row.type_observations)  # once: both below need it
    job_shape = _shape(row)
    seen = observations(row, speeds)
    reported = gradient(row)
    kin = NO_KIN if book is None or reported is None or not seen else book.joined(job_shape, seen)
    known = Known(
        shape=job_shape,
        epochs=EpochsToConverge.constant(spec.epochs),
        remaining_fraction=max(1e-3, 1.0 - row.epoch / spec.epochs),
        observations=seen,
        packed=profile(row.packed),
        attained_gpu_s=row.attained_gpu_s,
        # A row from before submissions set it says 0: waiting since submitted.
        state_since=max(row.state_since, row.submitted_at),
        priority=spec.priority,
        memory_gib=shape.get("memory_gib"),
        restart_s=shape.get(RESTART, restart_s),
        type_speed=speeds,
        attained_effective_s=shape.get(EFFECTIVE) if typed else None,
        gradient=reported,
        kin=kin,
    )
    types = tuple(spec.gpu_type or ())
    submitted = Submitted(
        row.id,
        row.submitted_at,
        spec.lowest,
        spec.highest,
        spec.gpus,
        spec.elastic,
        spec.user,
        types,
        parameter_server=spec.arch is Arch.PS,
    )
    capacity = sum(map(cluster.capacity_of, types)) if types else cluster.capacity
    now_held = held_on(held(row), cluster.node_types)
    return job_view(submitted, known, now_held, target, capacity=capacity, needs=needs)


def _shape(row: JobRow) -> JobShape:
    """What the job's training loop reported of itself (defaults where it said nothing)."""
    shape = row.shape
    return JobShape(
        int(shape.get("examples_per_epoch", UNREPORTED.examples_per_epoch)),
        int(shape.get("batch_per_worker", UNREPORTED.batch_per_worker)),
        float(shape.get("grad_bytes", UNREPORTED.grad_bytes)),
    )


def observations(row: JobRow, speeds: Mapping[str, float] | None) -> dict[int, Observation]:
    """Step times per world size; with the job's ``speeds`` per type (``measured_speeds``:
    None on one type), in its fastest measured type's terms."""
    raw = {int(w): o for w, o in profile(row.observations).items()}
    if not speeds:
        return raw
    return observations_in_best_terms(speeds, row.type_observations, raw)


KIN_SEED = 2_000
"""The most finished jobs whose step times a starting server reads back into its kin."""


def seed_kin(book: KinBook, store: Store, cluster: ClusterView) -> int:
    """Read back into ``book`` what the last ``KIN_SEED`` finished jobs that adapted their
    batch measured, oldest first, so that a restarted server knows what the one before
    it did (the book itself is not stored). Returns the jobs read back."""
    finished = tuple(s.value for s in State if s.finished)
    rows, _ = store.page(PageQuery(limit=KIN_SEED, states=finished, newest_first=True))
    seeded = 0
    for row in reversed(rows):
        if isinstance(row, JobRow) and row.observations and gradient(row) is not None:
            speeds = measured_speeds(cluster, row.type_observations)
            book.record(_shape(row), observations(row, speeds))
            seeded += 1
    return seeded
