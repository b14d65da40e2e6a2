"""Fidelity workload files: real jobs from ``ringleader.workloads``, with arrival times.

A file names the local server's devices, the policies to compare and the
jobs; each job is one of the reference workloads with its command-line
arguments. It is YAML validated strictly (a typo is an error naming the field),
and nothing in it reaches a shell: a job's command is built as an argument
list. See ``docs/fidelity.md`` and ``examples/fidelity.yaml``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ringleader.fidelity.device import NONE, DeviceTime
from ringleader.inputs import load_yaml_model
from ringleader.runtime.state.spec import BatchSpec, JobSpec

MAX_FILE_BYTES = 1 << 20
Seconds = Annotated[float, Field(ge=0, le=86_400, allow_inf_nan=False)]
ArgValue = (
    Annotated[int, Field(ge=-(10**9), le=10**9)]
    | Annotated[float, Field(allow_inf_nan=False)]
    | Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]{1,64}$")]
)
WORKLOADS = ("resnet", "transformer", "goodput")
"""Modules of ``ringleader.workloads`` a fidelity job may run."""


class FidelityFileError(ValueError):
    """A fidelity workload file that cannot be used; the message says where and why."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FidelityJob(_Strict):
    name: Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.\-]+$")]
    submit_s: Seconds = 0.0
    workload: Literal["resnet", "transformer", "goodput"]
    epochs: Annotated[float, Field(gt=0, le=1000, allow_inf_nan=False)]
    args: dict[Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{0,40}$")], ArgValue] = {}
    gpus: Annotated[int, Field(ge=1, le=64)] = 1
    elastic: bool = False
    min_gpus: Annotated[int, Field(ge=1, le=64)] | None = None
    max_gpus: Annotated[int, Field(ge=1, le=64)] | None = None
    batch: BatchSpec | None = None
    """The spec's ``batch``: the job adapts its batch (``workload: goodput`` does)."""

    @model_validator(mode="after")
    def _check(self) -> FidelityJob:
        if "epochs" in self.args:
            raise ValueError("args.epochs: set 'epochs' on the job itself, not in args")
        try:
            self.spec()
        except ValidationError as err:
            first = err.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or "(job)"
            raise ValueError(f"{field}: {first['msg'].removeprefix('Value error, ')}") from None
        return self

    def command(self) -> list[str]:
        """The job's command as an argument list (never through a shell)."""
        argv = [
            "python",
            "-m",
            f"ringleader.workloads.{self.workload}",
            "--epochs",
            f"{self.epochs:g}",
        ]
        for key, value in self.args.items():
            argv += [f"--{key}", str(value)]
        return argv

    def device_time(self) -> DeviceTime:
        """What its stand-in for a GPU's compute sleeps per step (``fidelity.device``)."""
        if self.workload != "goodput":
            return NONE
        most = self.batch.per_gpu_max if self.batch is not None else None
        return DeviceTime(self._ms("step-ms"), self._ms("compute-ms-per-example"), most)

    def _ms(self, arg: str) -> float:
        """Argument ``arg`` in seconds, where it is milliseconds (0: not a number)."""
        try:
            return float(self.args.get(arg, 0.0)) / 1000
        except ValueError:
            return 0.0

    def spec(self) -> JobSpec:
        """The job as submitted to ``ringleader server``."""
        return JobSpec(
            name=self.name,
            command=self.command(),
            gpus=self.gpus,
            elastic=self.elastic,
            min_gpus=self.min_gpus,
            max_gpus=self.max_gpus,
            epochs=self.epochs,
            batch=self.batch,
        )


class FidelityWorkload(_Strict):
    version: Literal[1] = 1
    devices: Annotated[int, Field(ge=1, le=64)] = 4
    """Virtual devices of the local server (GPUs, where the machine has them)."""
    round_s: Annotated[float, Field(ge=1, le=3600, allow_inf_nan=False)] = 10.0
    """Both bodies re-plan at least this often."""
    quantum_s: Annotated[float, Field(ge=1, le=3600, allow_inf_nan=False)] | None = None
    """Time-slicing quantum of the sharing policies (their default when left out)."""
    policies: list[str] = Field(default=[], max_length=20)
    """Policies to compare when the command line names none."""
    jobs: list[FidelityJob] = Field(min_length=1, max_length=200)

    @model_validator(mode="after")
    def _check(self) -> FidelityWorkload:
        names = [j.name for j in self.jobs]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"jobs: duplicate names {dupes}; give every job its own name")
        for i, job in enumerate(self.jobs):
            least = job.min_gpus or (1 if job.elastic else job.gpus)
            if least > self.devices:
                raise ValueError(
                    f"jobs[{i}]: needs at least {least} devices but the server has "
                    f"{self.devices} (lower its gpus/min_gpus or raise devices)"
                )
        return self

    def submissions(self) -> list[tuple[float, dict[str, Any]]]:
        """(seconds after the start, job spec) in arrival order."""
        ordered = sorted(self.jobs, key=lambda j: j.submit_s)
        # No `user`: a job is whoever submits it (the server says so from the token).
        return [
            (j.submit_s, j.spec().model_dump(exclude_none=True, exclude={"user"})) for j in ordered
        ]


def load_fidelity_workload(path: Path) -> FidelityWorkload:
    """Read and validate a fidelity workload; raises ``FidelityFileError`` on any problem."""
    return load_yaml_model(
        path,
        FidelityWorkload,
        what="fidelity workload",
        error=FidelityFileError,
        limit=MAX_FILE_BYTES,
        top="'jobs'",
    )
