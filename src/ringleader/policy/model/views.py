"""The snapshot a policy decides from: what the cluster has and what each job is.

Everything here is immutable to the policy: data a body (simulator or
runtime) builds at decision time. Between decisions the body that built a
job's view may move its progress and its placement on in place
(``spine.views.progress_view``, ``placement_view``), so a stage that keeps a
view from one decision to the next reads them as of the decision at hand.
The policy never sees a clock, a process or a file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from ringleader.perf.allreduce import Algorithm
from ringleader.perf.epochs import EpochsToConverge
from ringleader.perf.gradient import GradientReport
from ringleader.perf.speed import SpeedModel


class Device:
    """One GPU: its node's name and its index on that node.

    A value like a frozen, ordered dataclass (equal, hashed and ordered by
    ``(node, index)``, read-only), written out by hand for the same reason as
    ``Observation``: placement sorts and hashes devices by the million (every
    group's devices, every kept GPU), and a dataclass compares through
    interpreted ``__eq__``/``__lt__`` that build two tuples per comparison.
    The hash is the dataclass's, ``hash((node, index))`` (worked out once: a
    device is hashed far more often than made), so sets of devices iterate as
    they did.
    """

    __slots__ = ("_hash", "index", "node")

    def __init__(self, node: str, index: int) -> None:
        self.node: Final = node
        self.index: Final = index
        self._hash: Final = hash((node, index))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Device):
            return NotImplemented
        return self.index == other.index and self.node == other.node

    def __ne__(self, other: object) -> bool:
        if not isinstance(other, Device):
            return NotImplemented
        return self.index != other.index or self.node != other.node

    def __lt__(self, other: Device) -> bool:
        if self.node != other.node:
            return self.node < other.node
        return self.index < other.index

    def __le__(self, other: Device) -> bool:
        if self.node != other.node:
            return self.node < other.node
        return self.index <= other.index

    def __gt__(self, other: Device) -> bool:
        if self.node != other.node:
            return self.node > other.node
        return self.index > other.index

    def __ge__(self, other: Device) -> bool:
        if self.node != other.node:
            return self.node > other.node
        return self.index >= other.index

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"Device(node={self.node!r}, index={self.index!r})"

    def __reduce__(self) -> tuple[type[Device], tuple[str, int]]:
        return (Device, (self.node, self.index))


GPU_TYPE_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,31}$"
"""What a GPU type may be called, wherever one is named (``--gpus``, specs, workload
files): lower-case letters, digits, ``_ . -``; at most 32 characters."""


@dataclass(frozen=True, slots=True)
class Node:
    """One machine: its GPUs, all of one type (``""``: a cluster that names no types)."""

    name: str
    gpus: int
    gpu_memory_gib: float = 16.0
    gpu_type: str = ""
    rack: str = ""
    """The rack it is in (``""``: a cluster that names no racks): where a gang that
    spans two syncs over the slower links between racks."""


@dataclass(frozen=True, slots=True)
class ClusterView:
    nodes: tuple[Node, ...]
    _types: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _type_of: dict[str, str] = field(init=False, repr=False, compare=False)
    _memory_of: dict[str, float] = field(init=False, repr=False, compare=False)
    _rack_of: dict[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Worked out once: a decision asks for them often, and memoising them elsewhere
        # would hash every Node.
        types = tuple(dict.fromkeys(n.gpu_type for n in self.nodes)) or ("",)
        object.__setattr__(self, "_types", types)
        object.__setattr__(self, "_type_of", {n.name: n.gpu_type for n in self.nodes})
        object.__setattr__(self, "_memory_of", {n.name: n.gpu_memory_gib for n in self.nodes})
        object.__setattr__(self, "_rack_of", {n.name: n.rack for n in self.nodes})

    @classmethod
    def uniform(
        cls, nodes: int, gpus_per_node: int, nodes_per_rack: int | None = None
    ) -> ClusterView:
        """``nodes`` of ``gpus_per_node`` GPUs, in racks of ``nodes_per_rack`` in order
        (None: no racks)."""
        width = len(str(max(nodes - 1, 0)))
        if nodes_per_rack is None:
            return cls(tuple(Node(f"node{i:0{width}d}", gpus_per_node) for i in range(nodes)))
        racks = len(str(max((nodes - 1) // nodes_per_rack, 0)))
        return cls(
            tuple(
                Node(
                    f"node{i:0{width}d}", gpus_per_node, rack=f"rack{i // nodes_per_rack:0{racks}d}"
                )
                for i in range(nodes)
            )
        )

    @classmethod
    def typed(cls, types: Mapping[str, tuple[int, int]]) -> ClusterView:
        """Nodes of each GPU type, ``{type: (nodes, gpus_per_node)}``, named ``type-i``."""
        nodes: list[Node] = []
        for gpu_type, (count, per_node) in types.items():
            width = len(str(max(count - 1, 0)))
            nodes.extend(
                Node(f"{gpu_type}-{i:0{width}d}", per_node, gpu_type=gpu_type) for i in range(count)
            )
        return cls(tuple(nodes))

    @property
    def capacity(self) -> int:
        return sum(n.gpus for n in self.nodes)

    @property
    def widest_node(self) -> int:
        """The most GPUs one node has (0: no node): where a job spans two nodes first."""
        return max((n.gpus for n in self.nodes), default=0)

    @property
    def types(self) -> tuple[str, ...]:
        """The GPU types in the cluster, in node order (``("",)`` for an untyped one)."""
        return self._types

    @property
    def heterogeneous(self) -> bool:
        return len(self._types) > 1

    def type_of(self, node: str) -> str:
        """The GPU type of ``node``'s GPUs."""
        return self._type_of[node]

    @property
    def node_types(self) -> Mapping[str, str]:
        """Each node's GPU type, by node name (worked out once, not to be changed)."""
        return self._type_of

    @property
    def node_racks(self) -> Mapping[str, str]:
        """Each node's rack, by node name (``""`` where the cluster names no racks; worked
        out once, not to be changed)."""
        return self._rack_of

    @property
    def racked(self) -> bool:
        """Whether the cluster names racks."""
        return any(self._rack_of.values())

    @property
    def node_memory(self) -> Mapping[str, float]:
        """Each node's GPU memory in GiB, by node name (worked out once: Gandiva's stack
        asks for it at every decision, and a time-slicing run never reads it)."""
        return self._memory_of

    def capacity_of(self, gpu_type: str) -> int:
        return sum(n.gpus for n in self.nodes if n.gpu_type == gpu_type)


@dataclass(frozen=True, slots=True)
class JobShape:
    """What the speed model needs to know about a job's training loop."""

    examples_per_epoch: int
    batch_per_worker: int
    grad_bytes: float
    algorithm: Algorithm = Algorithm.BINARY_BLOCKS
    global_batch: int | None = None
    """Strong scaling: the global batch the job keeps at every size (None: weak scaling,
    ``batch_per_worker`` per worker whatever the size)."""

    def batch_at(self, workers: int) -> float:
        """Each worker's batch at ``workers`` workers."""
        return self.batch_per_worker if self.global_batch is None else self.global_batch / workers


class Observation:
    """Mean measured seconds per minibatch at one worker count, and for how long.

    A value like the frozen dataclasses here (equal by fields, hashable, and
    read-only once built: ``Final``, which the compiled build enforces), but
    written out by hand: a running job's is made anew at every simulated
    event (``spine.observe.fold``), and a frozen dataclass is built through
    ``object.__setattr__`` per field (docs/scale.md, "The compiled hot path").
    """

    __slots__ = ("batch_per_worker", "seconds", "step_time")

    def __init__(self, step_time: float, seconds: float, batch_per_worker: float) -> None:
        self.step_time: Final = step_time
        self.seconds: Final = seconds
        self.batch_per_worker: Final = batch_per_worker

    def _key(self) -> tuple[float, float, float]:
        return (self.step_time, self.seconds, self.batch_per_worker)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Observation):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"Observation(step_time={self.step_time!r}, seconds={self.seconds!r}, "
            f"batch_per_worker={self.batch_per_worker!r})"
        )

    def __reduce__(self) -> tuple[type[Observation], tuple[float, float, float]]:
        return (Observation, self._key())


@dataclass(frozen=True, slots=True)
class JobView:
    """One job as the policy sees it.

    ``remaining_fraction`` is the share of the job's training still to do
    (1.0 at submission); times ``epochs.at(w)`` it is the remaining epochs at
    ``w`` workers (see ``ringleader.policy.model.objective``). ``speed`` is a speed
    model known in advance (precomputed profiling) or ``None``;
    ``observations`` are what the job has reported so far, per worker count.
    """

    id: str
    memo: dict[object, object] | None = field(default=None, init=False, repr=False, compare=False)
    """What the policy's stages worked out from this very view (``Memo``), kept on it:
    not part of the job's data, nor of its equality; a copy (``dataclasses.replace``)
    starts without one. Next to ``id``: most stages read the two and little else
    of most jobs, and here they share the object's first cache line."""
    submitted_at: float
    shape: JobShape
    epochs: EpochsToConverge
    remaining_fraction: float = 1.0
    min_gpus: int = 1
    max_gpus: int = 8
    requested_gpus: int = 1
    elastic: bool = True
    priority: int = 0
    devices: tuple[Device, ...] = ()
    workers: int = 0
    suspended: bool = False
    """Resident on ``devices`` but not running (time-sliced out)."""
    speed: SpeedModel | None = None
    observations: Mapping[int, Observation] = field(default_factory=dict)
    attained_gpu_s: float = 0.0
    """GPU-seconds the job has held so far (Tiresias' attained service)."""
    attained_effective_s: float | None = None
    """GPU-seconds weighted by the speed of the type held over the job's fastest type:
    the service it got, in its best GPUs' terms (None: as ``attained_gpu_s``)."""
    state_since: float = 0.0
    """When the job last started running, was suspended, or was queued."""
    packed: Mapping[str, Observation] = field(default_factory=dict)
    """Measured minibatch time while packed with each other job (by id) on one GPU."""
    memory_gib: float | None = None
    """Peak device memory the job was seen to use, when known (packing checks it)."""
    restart_s: float = 0.0
    """Seconds a checkpoint-stop-restart of this job costs, as the body measured it
    (0: unknown, and resizes are not weighed against it)."""
    user: str = ""
    """Who submitted it, for fair share between users ("" where a body has no users)."""
    gpu_types: tuple[str, ...] = ()
    """The GPU types the job may run on (empty: any); every placement honours it."""
    parameter_server: bool = False
    """Rank 0 is a parameter server: every step it sends the model to each worker,
    through its host's NIC, where a traffic stage may rank it against other jobs'."""
    type_speed: Mapping[str, float] = field(default_factory=dict)
    """The job's speed on each GPU type, relative to the speed its model and observations
    describe (1.0). A type missing here is taken as 1.0; a gang on mixed types runs at
    its slowest type's speed (``speed_on``)."""
    gradient: GradientReport | None = None
    """The gradient statistics the job last reported, where it adapts its batch to its
    GPUs (``perf.gradient``): what a goodput stage weighs each batch by. None: it keeps
    its batch, or has said nothing yet."""
    type_models: Mapping[str, SpeedModel] = field(default_factory=dict)
    """The job's true speed model on each GPU type, where it was measured on each and the
    policy may know the truth (``Needs.true_model``): a policy that weighs types by
    their goodput reads a type's from here before ``speed`` times ``type_speed``."""
    kin: Mapping[int, Observation] = field(default_factory=dict)
    """Step times by size measured by other jobs of the same model (``spine.kin``): what a
    profile stage may fit beside ``observations`` where the job has not run at a size.
    Empty for a job that keeps its batch, or is the first of its model."""

    @property
    def running(self) -> bool:
        """Resident on ``devices`` and running (not time-sliced out)."""
        return self.workers > 0 and not self.suspended

    def speed_on(self, types: Iterable[str]) -> float:
        """Relative speed on GPUs of ``types``: the slowest one's (a gang waits for it)."""
        speeds = self.type_speed
        return min((speeds.get(t, 1.0) for t in types), default=1.0)

    def allows(self, gpu_type: str) -> bool:
        return not self.gpu_types or gpu_type in self.gpu_types


Memo = dict[object, object]
"""What stages worked out from one view, hung on the view itself (``JobView.memo``).

Opaque to the model: each cache keys its own slot (with itself, so two policies
deciding on the same views never take each other's) and knows what it put there.
An answer is only ever for the very view it hangs from: a body that builds a new
view starts with none."""


def memo_of(job: JobView) -> Memo:
    """``job``'s memo, hung on it now if it has none."""
    memo = job.memo
    if memo is None:
        memo = {}
        if _NATIVE:
            job.memo = memo  # type: ignore[misc]
        else:
            object.__setattr__(job, "memo", memo)
    return memo


_NATIVE = not __file__.endswith(".py")
"""Compiled, a store to a view's field from this module is a plain store into the
object (as in ``spine.views``); in pure Python the frozen class's ``__setattr__``
refuses it, and it goes through ``object.__setattr__``."""
