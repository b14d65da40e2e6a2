"""A workload file's schema: what each field may hold, checked by pydantic.

Unknown fields are rejected (``_Strict``), so a typo is an error rather than a
silently ignored setting; bounds keep a typo from becoming a run that never
ends. ``workload_file`` loads a file against it and builds the simulation.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ringleader.perf.allreduce import Algorithm
from ringleader.policy.model.views import GPU_TYPE_PATTERN, ClusterView
from ringleader.sim.engine import DEFAULT_RESTART_DELAY_S, DEFAULT_ROUND_S
from ringleader.sim.profiles import PROFILES
from ringleader.sim.workload_failures import FailuresSpec
from ringleader.sim.workload_topology import TopologySpec, check_racks

PositiveInt = Annotated[int, Field(gt=0)]


DAY_S = 86_400.0

# Upper bounds keep a typo (1e9 nodes, 1e300 seconds) from becoming a run that
# never ends; each is far beyond any real cluster or job.
Workers = Annotated[int, Field(gt=0, le=1 << 17)]
Seconds = Annotated[float, Field(ge=0, le=1e9, allow_inf_nan=False)]


TypeName = Annotated[str, Field(pattern=GPU_TYPE_PATTERN)]
StepTimes = dict[Workers, Annotated[float, Field(gt=0, le=DAY_S, allow_inf_nan=False)]]


UserName = Annotated[str, Field(min_length=1, max_length=64)]


class WorkloadFileError(ValueError):
    """A workload file that cannot be used; the message says where and why."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NodesSpec(_Strict):
    nodes: Annotated[int, Field(gt=0, le=10_000)]
    gpus_per_node: Annotated[int, Field(gt=0, le=64)]


class ClusterSpec(_Strict):
    """``nodes`` × ``gpus_per_node`` of one GPU type, or ``types``: that per GPU type."""

    nodes: Annotated[int, Field(gt=0, le=10_000)] | None = None
    gpus_per_node: Annotated[int, Field(gt=0, le=64)] | None = None
    types: dict[TypeName, NodesSpec] | None = Field(None, min_length=1, max_length=64)
    nodes_per_rack: Annotated[int, Field(gt=0, le=10_000)] | None = None
    """Nodes in each rack, in order (None: no racks); with ``nodes``, not ``types``."""

    @model_validator(mode="after")
    def _one_form(self) -> ClusterSpec:
        plain = self.nodes is not None or self.gpus_per_node is not None
        if plain == (self.types is not None):
            raise ValueError(
                "give nodes and gpus_per_node, or types: {v100: {nodes: 3, gpus_per_node: 4}, "
                "...}, not both"
            )
        if plain and (self.nodes is None or self.gpus_per_node is None):
            raise ValueError("give both nodes and gpus_per_node")
        if self.nodes_per_rack is not None and self.types is not None:
            raise ValueError("nodes_per_rack: racks go with nodes and gpus_per_node, not types")
        return self

    def view(self) -> ClusterView:
        if self.types is None:
            assert self.nodes is not None and self.gpus_per_node is not None
            return ClusterView.uniform(self.nodes, self.gpus_per_node, self.nodes_per_rack)
        return ClusterView.typed({t: (n.nodes, n.gpus_per_node) for t, n in self.types.items()})

    @property
    def type_names(self) -> tuple[str, ...]:
        return tuple(self.types or ())


class SimulationSpec(_Strict):
    restart_delay_s: Annotated[float, Field(ge=0, le=DAY_S, allow_inf_nan=False)] = (
        DEFAULT_RESTART_DELAY_S
    )
    round_s: Annotated[float, Field(ge=0.1, le=DAY_S, allow_inf_nan=False)] | None = DEFAULT_ROUND_S
    """Ask the policy again at least this often (None: only at events); a round at which
    nothing moved is skipped where the last plan reads no clock (``Plan.settled``)."""
    tick_s: Annotated[float, Field(ge=0.01, le=DAY_S, allow_inf_nan=False)] | None = None
    """Decide once a tick over every event since, as the runtime does (None: at every event)."""
    quantum_s: Annotated[float, Field(ge=0.1, le=DAY_S, allow_inf_nan=False)] | None = None
    """Time-slicing quantum for gandiva/time-slicing (None: the policy's own, 60 s)."""
    tiresias_thresholds_gpu_s: (
        list[Annotated[float, Field(ge=0, le=1e12, allow_inf_nan=False)]] | None
    ) = Field(None, max_length=16)
    """Attained-service queue thresholds for tiresias/ringleader, rising (None: theirs)."""
    user_weights: dict[
        Annotated[str, Field(min_length=1, max_length=64)],
        Annotated[float, Field(gt=0, le=1e6, allow_inf_nan=False)],
    ] = Field({}, max_length=10_000)
    """Fair-share weight per user for the ringleader policy (a user not named weighs 1)."""


class UserSpec(_Strict):
    """A user as the server knows them (``ringleader users add --quota-gpus``)."""

    quota_gpus: Annotated[int, Field(ge=0, le=1 << 20)] | None = None
    """GPUs the user's running jobs may use at once (``spine.quota``); None: no quota."""


class TypeStepsSpec(_Strict):
    step_time_s: StepTimes = Field(min_length=1)


class ModelSpec(_Strict):
    """A job model: measured step times and epochs to converge per worker count.

    ``step_time_s`` is measured on the cluster's first GPU type; ``types`` gives
    step times on others, and a type given neither runs as fast as the first.
    """

    step_time_s: StepTimes = Field(min_length=2)
    types: dict[TypeName, TypeStepsSpec] = Field({}, max_length=64)
    epochs: (
        Annotated[float, Field(gt=0, le=1e6, allow_inf_nan=False)]
        | dict[Workers, Annotated[float, Field(gt=0, le=1e6, allow_inf_nan=False)]]
    )
    examples_per_epoch: Annotated[int, Field(gt=0, le=10**10)]
    batch_per_worker: Annotated[int, Field(gt=0, le=10**6)]
    grad_bytes: Annotated[float, Field(gt=0, le=1e13, allow_inf_nan=False)]

    @model_validator(mode="after")
    def _some_epochs(self) -> ModelSpec:
        if isinstance(self.epochs, dict) and not self.epochs:
            raise ValueError("epochs: give a number, or a mapping of worker count to epochs")
        return self

    allreduce: Algorithm = Algorithm.BINARY_BLOCKS


FileName = Annotated[str, Field(min_length=1, max_length=255, pattern=r"^[A-Za-z0-9_.-]+$")]
"""A file in a profile folder: a name, not a path."""


class MeasuredTypeSpec(_Strict):
    """One GPU type's step times for a measured model: files in its profile folder."""

    placements: FileName
    """Step and sync seconds per placement and per-GPU batch on this type (as
    ``placements.csv``; Sia's profiles name theirs ``placements-<cluster>.csv``)."""
    scalability: FileName | None = None
    """Its larger-scale rows, where measured (as ``scalability.csv``)."""


class MeasuredModelSpec(_Strict):
    """A job model that is a measurement: a folder of measured tables (Pollux's layout).

    ``profile`` holds ``placements.csv`` (step and sync seconds per placement and
    per-GPU batch), optionally ``scalability.csv``, and ``validation-<batch>.csv``
    (per-epoch progress and gradient statistics); a relative path is read from the
    workload file's folder. Its jobs give ``global_batch``: the batch they keep.
    ``types`` gives a table per GPU type instead: its jobs run only on those types,
    each at its own table's speed; without it, one table holds on every type.
    """

    profile: str = Field(min_length=1, max_length=4096)
    epochs: Annotated[int, Field(gt=0, le=100_000)] | None = None
    """Epochs to train (None: every epoch of the shortest validation run)."""
    max_micro_batch: Annotated[int, Field(gt=0, le=10**6)] | None = None
    """Largest per-GPU batch a step may take (None: the largest measured)."""
    adaptive: bool = False
    """Jobs pick their own batch by goodput as they train (Pollux's jobs)."""
    types: dict[TypeName, MeasuredTypeSpec] = Field({}, max_length=64)
    """Step-time files per GPU type (empty: ``placements.csv`` on every type)."""


class JobFields(_Strict):
    model: str
    gpus: Workers = 1
    min_gpus: Workers = 1
    max_gpus: Workers | None = None
    """None: the whole cluster for an elastic job, ``gpus`` for a fixed-size one."""
    elastic: bool = True
    work_scale: Annotated[float, Field(ge=1e-6, le=1e6, allow_inf_nan=False)] = 1.0
    global_batch: Annotated[int, Field(gt=0, le=10**9)] | None = None
    """Strong scaling: the job keeps this global batch, each of N workers taking
    global_batch / N (None: each worker takes the model's batch_per_worker)."""
    user: Annotated[str, Field(min_length=1, max_length=64)] | None = None
    """Who submits it, for fair share between users (None: one anonymous user)."""
    priority: Annotated[int, Field(ge=-1000, le=1000)] = 0
    """Higher runs first, within its user's share (policies that honour priority)."""
    gpu_type: list[TypeName] | None = Field(None, min_length=1, max_length=64)
    """The GPU types the job may run on (None: any)."""
    checkpoint_s: Annotated[float, Field(ge=0, le=86_400.0, allow_inf_nan=False)] | None = None
    """What a checkpoint costs the job, where ``failures`` is on (None: its default)."""
    checkpoint_every_s: Annotated[float, Field(gt=0, le=1e7, allow_inf_nan=False)] | None = None
    """Seconds of progress between the job's checkpoints (None: ``failures.checkpoint``)."""
    comm_share: Annotated[float, Field(ge=0, lt=1, allow_inf_nan=False)] = 0.0
    """The share of its step spent synchronising within a rack, where ``topology`` is on:
    what grows when it spans racks (0: where it runs costs it nothing)."""

    @model_validator(mode="after")
    def _sizes(self) -> JobFields:
        if self.max_gpus is not None and self.min_gpus > self.max_gpus:
            raise ValueError(f"min_gpus ({self.min_gpus}) exceeds max_gpus ({self.max_gpus})")
        if self.gpus < self.min_gpus or (self.max_gpus is not None and self.gpus > self.max_gpus):
            raise ValueError(
                f"gpus ({self.gpus}) must lie within min_gpus..max_gpus "
                f"({self.min_gpus}..{self.max_gpus})"
            )
        return self

    def widest(self, capacity: int) -> int:
        """``max_gpus`` as given, else the cluster for an elastic job (at least ``gpus``)."""
        if self.max_gpus is not None:
            return self.max_gpus
        return max(capacity, self.gpus) if self.elastic else self.gpus


class JobSpec(JobFields):
    name: str = Field(min_length=1, max_length=200)
    submit_s: Seconds = 0.0


class PoissonSpec(JobFields):
    count: PositiveInt = Field(le=1_000_000)
    mean_gap_s: Annotated[float, Field(gt=0, le=1e7, allow_inf_nan=False)]
    seed: Annotated[int, Field(ge=0, le=2**63 - 1)] = 0
    start_s: Seconds = 0.0
    name_prefix: str = "job"


class WorkloadSpec(_Strict):
    version: Literal[1] = 1
    cluster: ClusterSpec
    simulation: SimulationSpec = SimulationSpec()
    models: dict[str, ModelSpec] = {}
    measured_models: dict[str, MeasuredModelSpec] = Field({}, max_length=1000)
    jobs: list[JobSpec] = []
    poisson: list[PoissonSpec] = []
    users: dict[UserName, UserSpec] = Field({}, max_length=10_000)
    failures: FailuresSpec | None = None
    """Nodes that fail during the run (``docs/failures.md``); None: nothing fails."""
    topology: TopologySpec | None = None
    """Racks' links and the placement rule (``docs/failures.md``); None: racks cost
    nothing."""

    @model_validator(mode="after")
    def _check(self) -> WorkloadSpec:
        known = set(PROFILES) | set(self.models) | set(self.measured_models)
        cluster = self.cluster.view()
        whole = cluster.capacity  # once: a sum over the nodes, and a file may list 10^6 jobs
        of_types: dict[tuple[str, ...], int] = {}
        types = self.cluster.type_names
        self._check_measured(types)
        for name, model in self.models.items():
            for t in model.types:
                if t not in types:
                    raise ValueError(
                        f"models.{name}.types.{t}: the cluster has no {t} GPUs ({offered(types)})"
                    )
        for kind, entries in (("jobs", self.jobs), ("poisson", self.poisson)):
            for i, entry in enumerate(entries):
                if entry.model not in known:
                    raise ValueError(
                        f"{kind}[{i}].model: unknown model {entry.model!r}; "
                        f"known: {', '.join(sorted(known))} (or define it under 'models')"
                    )
                capacity, of = whole, ""
                if entry.gpu_type is not None:
                    unknown = [t for t in entry.gpu_type if t not in types]
                    if unknown:
                        raise ValueError(
                            f"{kind}[{i}].gpu_type: the cluster has no {', '.join(unknown)} "
                            f"GPUs ({offered(types)})"
                        )
                allowed = self.allowed_types(entry)
                if allowed is not None and not allowed:
                    measured = ", ".join(self.measured_models[entry.model].types)
                    raise ValueError(
                        f"{kind}[{i}].gpu_type: model {entry.model!r} was measured on "
                        f"{measured} only; allow one of them, or add the type under "
                        f"measured_models.{entry.model}.types"
                    )
                if allowed is not None:
                    if allowed not in of_types:
                        of_types[allowed] = sum(map(cluster.capacity_of, allowed))
                    capacity = of_types[allowed]
                    of = f" of type {', '.join(allowed)}"
                for field in ("min_gpus", "gpus"):
                    if getattr(entry, field) > capacity:
                        raise ValueError(
                            f"{kind}[{i}].{field}: {getattr(entry, field)} GPUs but the cluster "
                            f"has only {capacity}{of}"
                        )
        names = [j.name for j in self.jobs]
        duplicates = sorted(n for n, k in Counter(names).items() if k > 1)
        if duplicates:
            raise ValueError(f"jobs: duplicate names {duplicates}; give every job its own name")
        if not self.jobs and not self.poisson:
            raise ValueError("no jobs: add a 'jobs' list or a 'poisson' generator")
        self._check_quotas()
        lists: list[tuple[str, Sequence[JobFields]]] = [
            ("jobs", self.jobs),
            ("poisson", self.poisson),
        ]
        per_rack = self.cluster.nodes_per_rack
        check_racks(per_rack, self.cluster.gpus_per_node, self.topology, lists)
        if self.failures is not None and self.failures.rack_per_hour and not per_rack:
            raise ValueError(
                "failures.rack_per_hour: the cluster names no racks; give "
                "cluster.nodes_per_rack, or leave rack_per_hour out"
            )
        return self

    def _check_measured(self, types: tuple[str, ...]) -> None:
        """Measured models on a cluster of one type, their names their own, and every job
        of one giving the global batch it keeps."""
        if not self.measured_models:
            return
        clash = sorted((set(self.models) | set(PROFILES)) & set(self.measured_models))
        if clash:
            raise ValueError(f"measured_models.{clash[0]}: the name is a model already; rename it")
        for name, model in self.measured_models.items():
            for t in model.types:
                if t not in types:
                    raise ValueError(
                        f"measured_models.{name}.types.{t}: the cluster has no {t} GPUs "
                        f"({offered(types)})"
                    )
        for kind, entries in (("jobs", self.jobs), ("poisson", self.poisson)):
            for i, entry in enumerate(entries):
                if entry.model in self.measured_models and entry.global_batch is None:
                    raise ValueError(
                        f"{kind}[{i}].global_batch: model {entry.model!r} is measured; give "
                        "the global batch the job keeps (within its validated batches)"
                    )

    def allowed_types(self, entry: JobFields) -> tuple[str, ...] | None:
        """The GPU types a job may run on: those it names, less those its measured model
        has no table for (None: any type)."""
        measured = self.measured_models.get(entry.model)
        if measured is None or not measured.types:
            return None if entry.gpu_type is None else tuple(entry.gpu_type)
        return tuple(t for t in entry.gpu_type or measured.types if t in measured.types)

    def _check_quotas(self) -> None:
        """Every user named has jobs, and every job fits its user's quota at its least."""
        entries = [("jobs", i, e) for i, e in enumerate(self.jobs)] + [
            ("poisson", i, e) for i, e in enumerate(self.poisson)
        ]
        named = {e.user for _, _, e in entries}
        for user, spec in self.users.items():
            if user not in named:
                known = ", ".join(sorted(u for u in named if u is not None)) or "none"
                raise ValueError(
                    f"users.{user}: no job names user {user!r}; give jobs 'user: {user}' "
                    f"or remove the entry (jobs name: {known})"
                )
            quota = spec.quota_gpus
            if quota is None:
                continue
            for kind, i, entry in entries:
                if entry.user == user and entry.min_gpus > quota:
                    raise ValueError(
                        f"users.{user}.quota_gpus: {quota} GPUs, but {kind}[{i}] needs at least "
                        f"{entry.min_gpus} (min_gpus) and could never run; raise the quota to "
                        f"{entry.min_gpus} or more, or lower the job's min_gpus"
                    )

    def quotas(self) -> dict[str, int]:
        """Each user's GPU quota, for the users that have one (as ``Users.quotas``)."""
        return {u: s.quota_gpus for u, s in self.users.items() if s.quota_gpus is not None}


def offered(types: tuple[str, ...]) -> str:
    return f"it has {', '.join(types)}" if types else "its GPUs name no type: see cluster.types"
