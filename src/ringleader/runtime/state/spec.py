"""What a user submits: a job spec, validated before anything is stored or run.

Unknown fields are rejected, and every problem is reported with its field and
reason, so the CLI can exit 2 and the API answer 422 with the same words.
"""

from __future__ import annotations

import shlex
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ringleader.inputs import field_path
from ringleader.policy.model.views import GPU_TYPE_PATTERN, ClusterView


class Arch(StrEnum):
    ALLREDUCE = "allreduce"
    PS = "ps"


class BatchSpec(BaseModel):
    """The global batches a job that adapts its batch to its GPUs may take (opt-in).

    The job is launched with the batch that gives it the most goodput on the
    GPUs it gets, by the gradient statistics it reports
    (``perf.gradient.best_batch``); before any, with ``global_min``. Where a
    GPU's share is more than ``per_gpu_max``, it takes the share in
    micro-batches whose gradients accumulate, so any ``global_min`` fits on
    any number of GPUs.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    global_min: Annotated[StrictInt, Field(ge=1, le=2**24)]
    """The batch its learning rate was tuned at, and the least it takes; progress is
    counted in steps of it."""
    global_max: Annotated[StrictInt, Field(ge=1, le=2**24)]
    """The most examples one step may take, over all its GPUs."""
    per_gpu_max: Annotated[StrictInt, Field(ge=1, le=2**20)]
    """The most one GPU takes at once (what fits in its memory): a larger share of a
    step is taken in micro-batches of at most this many, accumulated."""

    @field_validator("global_max")
    @classmethod
    def _ordered(cls, value: int, info: ValidationInfo) -> int:
        least = info.data.get("global_min")  # absent where it was itself refused
        if least is not None and value < least:
            raise ValueError(
                f"{value} is less than global_min ({least}): raise batch.global_max "
                "or lower batch.global_min"
            )
        return value


class JobSpec(BaseModel):
    """A training job. ``command`` runs once per worker, with the job library's variables set."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.\-]+$")]
    command: list[Annotated[str, Field(min_length=1, max_length=4096)]] = Field(
        min_length=1, max_length=512
    )
    # Strict: ``true`` is not 1 GPU and ``"2"`` is not 2 (JSON and YAML both
    # have real numbers and booleans; a coerced value hides a mistake).
    gpus: Annotated[StrictInt, Field(ge=1, le=4096)] = 1
    min_gpus: Annotated[StrictInt, Field(ge=1, le=4096)] | None = None
    max_gpus: Annotated[StrictInt, Field(ge=1, le=4096)] | None = None
    elastic: StrictBool = False
    arch: Arch = Arch.ALLREDUCE
    priority: Annotated[StrictInt, Field(ge=-1000, le=1000)] = 0
    user: Annotated[str, Field(min_length=1, max_length=100)] = "anonymous"
    epochs: Annotated[StrictFloat, Field(gt=0, le=1e7, allow_inf_nan=False)] = 1.0
    retries: Annotated[StrictInt, Field(ge=0, le=100)] = 2
    stop_grace_s: Annotated[StrictFloat | StrictInt, Field(ge=0, le=3600, allow_inf_nan=False)] = (
        30.0
    )
    """Seconds a stopping job gets, from the stop request, before its processes are killed.

    A script that uses the job library stops at its next minibatch boundary;
    one that does not is sent SIGTERM at once, as torchrun and Slurm do.
    """
    stall_s: (
        Annotated[StrictFloat | StrictInt, Field(ge=1, le=604_800, allow_inf_nan=False)] | None
    ) = None
    """Seconds with no new step while the job runs, after which a rank is taken to
    hang: the gang is killed and the job restarts from its last checkpoint (``stopped
    for stalled`` in its history). A stall with no step since the last one counts as a
    failure, against ``retries``. Only for jobs that report steps (the job library);
    before a generation's first step, at least the server's launch timeout (a start
    loads, imports and meets its peers first). None, the default: never."""
    on_bad_checkpoint: Literal["fail", "restart"] = "fail"
    """What a relaunch does when checkpoints exist and every one is damaged.

    ``fail`` (the default) ends the job as failed, saying so: starting over
    from step 0 would throw the training away without a word, and its new
    checkpoints would then prune the damaged ones, which might yet be saved.
    ``restart`` starts over from step 0 (the damaged files are kept aside).
    """
    on_non_finite: Literal["fail", "continue"] = "fail"
    """What a job on ``ringleader.elastic`` does when its weights stop being finite
    (a learning rate scaled too far): ``fail`` ends it at once, saying so and at which
    step; ``continue`` lets it go on (said once in its log)."""
    workdir: Annotated[str, Field(min_length=1, max_length=4096)] | None = None
    """Where the command runs (relative paths in it resolve there); None: the job's directory.

    An absolute path: the CLI resolves a relative one against the directory
    it is run from, and submits from there by default, as ``srun`` does.
    """
    env: dict[
        Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")],
        Annotated[str, Field(max_length=65536)],
    ] = {}
    gpu_type: list[Annotated[str, Field(pattern=GPU_TYPE_PATTERN)]] | None = Field(
        default=None, min_length=1, max_length=32
    )
    """The GPU types the job may run on, e.g. ``[v100, a100]`` (None: any). A job
    spread over types runs at its slowest type's pace; a policy that knows types
    keeps it on one where it can."""
    batch: BatchSpec | None = None
    """Where set, the job's global batch follows its GPUs within these bounds
    (``ringleader.elastic``); None: it keeps the batch its script sets."""

    @field_validator("gpu_type", mode="before")
    @classmethod
    def _one_type(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("gpu_type", mode="after")
    @classmethod
    def _distinct(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and len(set(value)) != len(value):
            raise ValueError("names a GPU type twice; name each once")
        return value

    @field_validator("command", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        return shlex.split(value) if isinstance(value, str) else value

    @field_validator("command", "env", mode="after")
    @classmethod
    def _no_nul(cls, value: Any) -> Any:
        # The kernel cannot pass a NUL in an argument or environment string: the
        # launch would fail later, with the job holding its GPUs meanwhile.
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for where, text in items:
            if "\x00" in text:
                what = f"[{where}]" if isinstance(where, int) else f".{where}"
                raise ValueError(f"{what} contains a NUL byte, which no process can be given")
        return value

    @field_validator("workdir", mode="after")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if "\x00" in value:
            raise ValueError("contains a NUL byte, which no path can hold")
        if not value.startswith("/"):
            raise ValueError(f"{value[:80]!r} is relative; give an absolute path")
        return value

    @model_validator(mode="after")
    def _sizes(self) -> JobSpec:
        low = self.min_gpus if self.min_gpus is not None else (1 if self.elastic else self.gpus)
        high = self.max_gpus if self.max_gpus is not None else self.gpus
        if low > high:
            raise ValueError(f"min_gpus ({low}) exceeds max_gpus ({high})")
        if not self.elastic and (self.min_gpus or self.max_gpus) and not low == high == self.gpus:
            raise ValueError("min_gpus/max_gpus differ from gpus: set elastic: true for a range")
        if not low <= self.gpus <= high:
            raise ValueError(
                f"gpus ({self.gpus}) must lie within min_gpus..max_gpus ({low}..{high})"
            )
        return self

    @property
    def lowest(self) -> int:
        if self.min_gpus is not None:
            return self.min_gpus
        return 1 if self.elastic else self.gpus

    @property
    def highest(self) -> int:
        return self.max_gpus if self.max_gpus is not None else self.gpus


class SpecError(ValueError):
    """A rejected spec; ``problems`` lists ``(field, reason)`` pairs."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{f}: {r}" for f, r in problems))


def parse_spec(
    data: Any, *, capacity: int | None = None, cluster: ClusterView | None = None
) -> JobSpec:
    """Validate ``data`` as a job spec; raises ``SpecError`` naming each bad field.

    With ``cluster``, also that its GPU types exist there and hold the job's
    smallest size (``capacity`` then defaults to the cluster's)."""
    if not isinstance(data, dict):
        raise SpecError([("(spec)", f"expected a mapping of fields, got {type(data).__name__}")])
    try:
        spec = JobSpec.model_validate(data)
    except ValidationError as err:
        problems = []
        for e in err.errors()[:20]:
            message = e["msg"].removeprefix("Value error, ")
            if e["type"].endswith("_type"):  # say what came instead, e.g. `true` for gpus
                message += f", not {type(e['input']).__name__} {repr(e['input'])[:60]}"
            problems.append((field_path(e["loc"], "(spec)"), message))
        raise SpecError(problems) from None
    if cluster is not None:
        capacity = cluster.capacity if capacity is None else capacity
        if spec.gpu_type is not None:
            capacity = _check_types(spec, cluster)
    if capacity is not None and spec.lowest > capacity:
        field = "min_gpus" if spec.elastic or spec.min_gpus else "gpus"
        of = f" of type {', '.join(spec.gpu_type)}" if cluster and spec.gpu_type else ""
        raise SpecError([(field, f"needs {spec.lowest} GPUs but the cluster has {capacity}{of}")])
    return spec


def _check_types(spec: JobSpec, cluster: ClusterView) -> int:
    """GPUs of the spec's types in ``cluster``; a type it lacks is a ``SpecError``."""
    assert spec.gpu_type is not None
    have = [t for t in cluster.types if t]
    unknown = [t for t in spec.gpu_type if t not in have]
    if unknown:
        offer = f"it has {', '.join(have)}" if have else "its GPUs name no type"
        raise SpecError(
            [("gpu_type", f"no {', '.join(unknown)} GPUs in this cluster ({offer}); leave it out")]
        )
    return sum(cluster.capacity_of(t) for t in spec.gpu_type)
