"""The API's bodies as types: what each endpoint takes and gives, for OpenAPI and clients.

Handlers still build their replies as plain data (the store's ``public`` and
``summary``); these models only describe them, and the property-based fuzz in
``tests/test_api_schema.py`` checks that every reply the server gives matches.
Requests are parsed strictly by hand (``api._json_body``), so their models are
documentation too: ``JobSpec`` itself is the submit body's schema.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Problem(BaseModel):
    field: str = Field(description="The request part at fault, e.g. gpus, command[1], (body).")
    reason: str = Field(description="What is wrong and how to fix it.")


class Problems(BaseModel):
    """422, 415, 421 and 403: what was refused, field by field."""

    detail: list[Problem]


class Message(BaseModel):
    """401, 404, 409, 507 and other refusals: one sentence."""

    detail: str


class Health(BaseModel):
    ok: bool
    version: str
    policy: str
    damaged_jobs: int | None = Field(None, description="Rows that cannot be read, if any.")


class User(BaseModel):
    name: str
    admin: bool
    uid: int | None = Field(description="Unix uid the user's jobs run as (root servers).")
    quota_gpus: int | None = Field(description="GPUs the user's running jobs may use at once.")
    priority_max: int
    created: float


class NewUser(BaseModel):
    """``POST /users``: a user to make (admins only)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[a-z_][a-z0-9_.-]{0,31}$")
    admin: bool = False
    uid: int | None = Field(None, ge=1, lt=2**31)
    quota_gpus: int | None = Field(None, ge=0)
    priority_max: int | None = Field(None, ge=-1000, le=1000)


class UserWithToken(User):
    token: str = Field(description="Shown this once; the server keeps only its hash.")


class Token(BaseModel):
    name: str
    token: str


class Removed(BaseModel):
    removed: str


class NodeShown(BaseModel):
    name: str
    gpus: int
    gpu_type: str = Field(
        "", description="The node's GPU type; empty where the cluster names none."
    )


class Cluster(BaseModel):
    executor: str
    gpus: int
    nodes: list[NodeShown] = Field(description="As last heard from the executor.")
    available: bool = Field(
        description="Whether the executor answers (Slurm's controller); while it does not, "
        "every job is held as it is."
    )
    unavailable_since: float | None = Field(None, description="Unix time it stopped answering.")
    reason: str | None = Field(None, description="What its last call said.")


class UsageSample(BaseModel):
    t: float
    running: dict[str, int] = Field(description="GPUs held by each user's running jobs.")
    suspended: int = Field(description="GPUs held by time-sliced-out jobs (kept, idle).")
    queued: int = Field(description="Jobs waiting.")


class Usage(BaseModel):
    """``GET /cluster/usage``: GPUs per user over the last hour, sampled every 2 s."""

    gpus: int
    now: float
    samples: list[UsageSample]


class DeviceHolder(BaseModel):
    user: str
    state: str = Field(description="running, or suspended (time-sliced out).")
    job: str | None = Field(description="The job's id; null where it is another user's.")
    name: str | None


class NodeDevices(BaseModel):
    name: str
    gpu_type: str
    gpus: list[list[DeviceHolder]] = Field(
        description="Per GPU index, the jobs on it (more than one where jobs are packed)."
    )


class Devices(BaseModel):
    """``GET /cluster/devices``: which job holds which GPU on which node."""

    nodes: list[NodeDevices]


class Ticket(BaseModel):
    """``POST /dashboard/ticket``: a one-time sign-in link for a browser."""

    url: str = Field(description="Path to open (once, soon) to sign a browser in.")
    expires_in: float


class PriorityChange(BaseModel):
    """``PATCH /jobs/ID``: what may change while a job runs."""

    model_config = ConfigDict(extra="forbid")

    priority: int = Field(ge=-1000, le=1000)


class Sizing(BaseModel):
    """Why a running job has its GPUs, in the policy's own numbers (``policy.plan.Sizing``)."""

    stop: str = Field(
        description="What ended its growth: at_max, no_gain, restart_not_won, outbid, "
        "unmeasured, no_model, fixed, probing, grown_idle."
    )
    workers: int
    next_workers: int | None = Field(description="The size a step not taken would have reached.")
    before_s: float | None = Field(description="The objective at ``workers``.")
    after_s: float | None = Field(description="The objective at ``next_workers``.")
    per_epoch: bool = Field(description="The objective is seconds per epoch, not remaining.")
    free: int | None
    bar: float | None = Field(description="Least gain per added GPU among the steps taken.")
    saved_s: float | None
    limit: int | None
    held: int | None
    measured: bool = Field(description="False while the objective came from a guessed model.")
    gain_per_gpu: float | None


class JobSummary(BaseModel):
    """A job as listings show it; a damaged row has state ``damaged`` and ``error`` says why."""

    id: str
    name: str | None
    user: str | None
    state: str
    gpus: int
    devices: list[str]
    gpu_types: list[str] = Field(
        default_factory=list,
        description="The GPU type of each of ``devices``, in order; empty where the cluster "
        "names no types.",
    )
    step: int
    epoch: float
    epochs: float | None
    loss: float | None
    submitted_at: float | None
    started_at: float | None
    finished_at: float | None
    attempts: int
    resizes: int
    counts: dict[str, int]
    bad_progress_lines: int
    error: str | None
    batch: int | None = Field(
        None,
        description="Where the spec's ``batch`` lets it adapt: the global batch of its latest "
        "launch (examples per step over all its GPUs).",
    )
    noise_scale: float | None = Field(
        None,
        description="Where the batch adapts: the gradient noise scale it last reported "
        "(examples), the batch past which a larger one helps little; null before it "
        "reported one, or while its gradient is lost in the noise (any batch helps).",
    )
    reason: str | None = Field(
        None, description="Why it waits or runs smaller than asked, when the scheduler knows."
    )
    reason_code: str | None = Field(
        None,
        description="The reason, for programs: over_quota, no_free_gpus, time_sliced_out, "
        "behind_in_order, runs_smaller, disk_full; for a running job sized_by_gain, "
        "fixed_size, profiling, grown_idle.",
    )
    turn_in_s: float | None = Field(
        None, description="A time-sliced-out job: seconds until its expected next turn."
    )
    sizing: Sizing | None = Field(
        None, description="A running job: the policy's own account of its size."
    )
    eta_s: float | None = Field(
        None,
        description="Seconds a running job should still take, at its measured speed on its "
        "current GPUs (null when not running or not yet measured).",
    )


class Event(BaseModel):
    model_config = ConfigDict(extra="allow")

    t: float
    kind: str


class Job(JobSummary):
    spec: dict[str, Any] | None = Field(
        description="The spec as submitted, ``env`` values shown as null (write-only)."
    )


class TypeSpeed(BaseModel):
    relative_speed: float = Field(description="Speed on this type over the job's fastest.")
    step_time_s: float | None = Field(description="Mean measured seconds per minibatch.")
    estimated: bool = Field(
        description="Never run on this type: estimated from the types it ran on."
    )


class JobWithEvents(Job):
    events: list[Event] = Field(
        description="The job's history, oldest first; each event also says its kind "
        "(``what``) and its detail (``text``) in words."
    )
    log_ranks: int | None = Field(
        None, description="Ranks whose logs ``/jobs/{id}/logs?rank=R`` can serve: 0 to this - 1."
    )
    type_speeds: dict[str, TypeSpeed] | None = Field(
        None,
        description="On a cluster of mixed GPU types, the job's speed on each, where it has "
        "reported step times on any (measured where it ran, estimated elsewhere).",
    )


ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": Message, "description": "No token, or not a valid one."},
    403: {
        "model": Message | Problems,
        "description": "Not allowed: an admin's endpoint, or a request from a foreign Origin.",
    },
    404: {"model": Message, "description": "No such job or user, or not the caller's."},
    415: {"model": Problems, "description": "A body that is not application/json."},
    421: {"model": Problems, "description": "A Host this server is not known by."},
    422: {"model": Problems, "description": "Bad input, field by field."},
    408: {"model": Message, "description": "A request sent too slowly (runtime/http/timeouts.py)."},
    507: {"model": Message, "description": "The disk holding the state dir is full."},
}
"""What any endpoint may answer besides success."""
