"""``ringleader server``: the REST API and the control loop, with its settings checked first."""

from __future__ import annotations

import asyncio
import logging
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

import typer
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ringleader.cli.errors import fail
from ringleader.cli.server_flags import (
    AddressFlag,
    AllowHostFlag,
    BodyTimeoutSFlag,
    ConfigFlag,
    ExecutorFlag,
    ExitGraceSFlag,
    GpusFlag,
    HeaderTimeoutSFlag,
    HostFlag,
    InsecureHttpFlag,
    IsolateJobsFlag,
    LeaveJobsRunningFlag,
    MaxLogMibFlag,
    MaxProgressMibFlag,
    PolicyFlag,
    QuantumSFlag,
    RoundSFlag,
    SlurmPartitionFlag,
    SlurmUrlFlag,
    StateDirFlag,
    TiresiasThresholdsFlag,
    TlsCertFlag,
    TrafficDeviceFlag,
    TrafficMbitFlag,
    WarmStartFlag,
)
from ringleader.inputs import (
    field_path,
    load_yaml,
    parse_thresholds,
    read_capped,
    thresholds_problem,
)

if TYPE_CHECKING:
    from ringleader.runtime.settings import ServerConfig
    from ringleader.runtime.workers.gpus import GpuLayout


def server(
    executor: ExecutorFlag = "local",
    address: AddressFlag = "auto",
    gpus: GpusFlag = None,
    state_dir: StateDirFlag = None,
    host: HostFlag = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535)] = 8765,
    policy: PolicyFlag = "elastic",
    config: ConfigFlag = None,
    round_s: RoundSFlag = 30.0,
    quantum_s: QuantumSFlag = None,
    tiresias_thresholds: TiresiasThresholdsFlag = None,
    warm_start: WarmStartFlag = True,
    max_log_mib: MaxLogMibFlag = 64,
    max_progress_mib: MaxProgressMibFlag = 16,
    slurm_partition: SlurmPartitionFlag = None,
    slurm_url: SlurmUrlFlag = None,
    traffic_device: TrafficDeviceFlag = None,
    traffic_mbit: TrafficMbitFlag = None,
    tls_cert: TlsCertFlag = None,
    tls_key: Annotated[Path | None, typer.Option(help="PEM private key for --tls-cert.")] = None,
    insecure_http: InsecureHttpFlag = False,
    isolate_jobs: IsolateJobsFlag = True,
    exit_grace_s: ExitGraceSFlag = 30.0,
    leave_jobs_running: LeaveJobsRunningFlag = False,
    header_timeout_s: HeaderTimeoutSFlag = 10.0,
    body_timeout_s: BodyTimeoutSFlag = 20.0,
    allow_host: AllowHostFlag = None,
) -> None:
    """Run the scheduler: REST API (OpenAPI at /openapi.json) plus the control loop.

    Every request but GET /health needs a token. On its first start the
    server makes the user `admin` and writes its token to STATE_DIR/admin.token
    (mode 0600); the CLI of whoever started the server finds it by itself.
    Add users with `ringleader users add NAME`.

    Workers run in their own sessions: stopping or crashing the server leaves
    them running, and the next server on the same --state-dir adopts them.
    """
    from ringleader.runtime.settings import ServerConfig, default_state_dir

    layout = _layout(executor, gpus)
    _check_slurm_flags(executor, slurm_partition, slurm_url)
    chosen = _policy_settings(policy, round_s, quantum_s, tiresias_thresholds, config)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per slurmrestd request
    cfg = ServerConfig(
        state_dir=state_dir or default_state_dir(),
        host=host,
        port=port,
        gpus=layout if layout is None or layout.typed else layout.total,
        policy=chosen.policy,
        probe_window_s=chosen.probe_window_s,
        round_s=chosen.round_s,
        quantum_s=chosen.quantum_s,
        thresholds_gpu_s=(
            None
            if chosen.tiresias_thresholds_gpu_s is None
            else tuple(chosen.tiresias_thresholds_gpu_s)
        ),
        executor=executor,
        address=address,
        slurm_partition=slurm_partition,
        slurm_url=slurm_url,
        warm_start=warm_start,
        log_cap_bytes=max_log_mib << 20,
        progress_cap_bytes=max_progress_mib << 20,
        tls_cert=tls_cert,
        tls_key=tls_key,
        insecure_http=insecure_http,
        allow_hosts=tuple(allow_host or ()),
        isolate_jobs=isolate_jobs,
        leave_jobs_running=leave_jobs_running,
        exit_grace_s=exit_grace_s,
        traffic_device=traffic_device,
        traffic_mbit=traffic_mbit,
        header_timeout_s=header_timeout_s,
        body_timeout_s=body_timeout_s,
    )
    _run(cfg)


def _layout(executor: str, gpus: str | None) -> GpuLayout | None:
    """The ``--gpus`` layout (None: the executor's own), once ``--executor`` is known good."""
    if executor not in ("local", "ray", "slurm"):
        fail(f"--executor: {executor!r} is not one of: local, ray, slurm")
    if executor == "slurm" and gpus is not None:
        fail("--gpus: with --executor slurm the nodes and GPUs are Slurm's (sinfo); drop it")
    layout = None
    if gpus is not None:
        from ringleader.runtime.workers.gpus import GpuSpecError, parse_gpus

        try:
            layout = parse_gpus(gpus)
        except GpuSpecError as err:
            fail(str(err))
    if executor == "ray":
        from ringleader.runtime.workers.executor.ray import env_has_ray

        if not env_has_ray():
            fail("--executor ray needs Ray: pip install 'ringleader[ray]'")
    return layout


def _check_slurm_flags(executor: str, partition: str | None, url: str | None) -> None:
    """``--slurm-partition`` and ``--slurm-url``: only with the Slurm executor; a name
    Slurm could have; an http(s) address, with a token to show it."""
    for flag, given in (("--slurm-partition", partition), ("--slurm-url", url)):
        if given is not None and executor != "slurm":
            fail(f"{flag}: only with --executor slurm; drop it, or add --executor slurm")
    if partition is not None and not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", partition):
        fail(
            f"--slurm-partition {partition!r}: not a partition name (letters, digits, "
            "'_', '.' and '-', at most 64); `sinfo -s` lists the cluster's"
        )
    if url is None:
        return
    if not re.fullmatch(r"https?://[A-Za-z0-9_.:\[\]-]+(:[0-9]{1,5})?/?", url):
        fail(
            f"--slurm-url {url!r}: not the address of slurmrestd; give "
            "http://HOST:PORT (or https://), e.g. http://slurm-head:6820"
        )
    if not (os.environ.get("SLURM_JWT", "").strip() or os.environ.get("SLURM_JWT_FILE")):
        fail(
            "--slurm-url: set SLURM_JWT to the service account's token (`scontrol token "
            "username=NAME lifespan=SECONDS` on the cluster), or SLURM_JWT_FILE to a file "
            "that holds it and is renewed before it expires; slurmrestd takes no other"
        )


def _policy_settings(
    policy: str,
    round_s: float,
    quantum_s: float | None,
    tiresias_thresholds: str | None,
    config: Path | None,
) -> PolicySettings:
    """The policy's settings from the flags, then ``--config`` over them, checked."""
    settings: dict[str, Any] = {"policy": policy, "round_s": round_s, "quantum_s": quantum_s}
    if tiresias_thresholds is not None:
        try:
            settings["tiresias_thresholds_gpu_s"] = list(parse_thresholds(tiresias_thresholds))
        except ValueError as err:
            fail(f"--tiresias-thresholds: {err}")
    if config is not None:
        try:
            loaded = load_yaml(read_capped(config, 1 << 20, "server config", ValueError))
        except (ValueError, yaml.YAMLError) as err:
            fail(f"--config {config}: {err}")
        if not isinstance(loaded, dict):
            fail(f"--config {config}: expected a mapping of {', '.join(PolicySettings.KEYS)}")
        settings.update(loaded)
    try:
        return PolicySettings.model_validate(settings)
    except ValidationError as err:
        where = f"--config {config}: " if config is not None else ""
        e = err.errors()[0]
        message = e["msg"].removeprefix("Value error, ")
        if not e["loc"]:  # a check across fields: its message names them
            fail(f"{where}{message}")
        fail(f"{where}{field_path(e['loc'], '(config)')}: {message}")


def _run(cfg: ServerConfig) -> None:
    """Serve until stopped; a refusal to start is one line and exit status 2."""
    from ringleader.runtime.claims import PortInUse
    from ringleader.runtime.server import serve
    from ringleader.runtime.settings import ConfigError
    from ringleader.runtime.state.errors import StoreError
    from ringleader.runtime.workers.executor.ray import RayUnavailable

    try:
        asyncio.run(serve(cfg))
    except ConfigError as err:
        fail(str(err))
    except (StoreError, PortInUse) as err:
        fail(str(err))
    except RayUnavailable as err:
        fail(f"--executor ray: {err}")


_THRESHOLDS = "tiresias_thresholds_gpu_s (--tiresias-thresholds)"


class PolicySettings(BaseModel):
    """What ``--config`` may set; the same bounds as the flags."""

    model_config = ConfigDict(extra="forbid", strict=True)
    KEYS: ClassVar[tuple[str, ...]] = (
        "policy",
        "probe_window_s",
        "round_s",
        "quantum_s",
        "tiresias_thresholds_gpu_s",
    )

    policy: str
    probe_window_s: Annotated[float, Field(ge=0.5, allow_inf_nan=False)] | None = None
    round_s: Annotated[float, Field(ge=0.1, le=86_400, allow_inf_nan=False)] = 30.0
    quantum_s: Annotated[float, Field(ge=0.5, le=86_400, allow_inf_nan=False)] | None = None
    tiresias_thresholds_gpu_s: (
        list[Annotated[float, Field(ge=0, lt=1e12, allow_inf_nan=False)]] | None
    ) = None

    @model_validator(mode="after")
    def _queues(self) -> PolicySettings:
        levels = self.tiresias_thresholds_gpu_s
        if levels is None:
            return self
        problem = thresholds_problem(levels)
        if problem is not None:
            raise ValueError(f"{_THRESHOLDS}: {problem}")
        from ringleader.policy.catalog import SettingNotUsed, policy_from_config

        try:
            policy_from_config(self.policy, thresholds_gpu_s=tuple(levels), strict=True)
        except SettingNotUsed as err:
            raise ValueError(f"{_THRESHOLDS}: {err}") from None
        return self

    @field_validator("policy")
    @classmethod
    def _known(cls, value: str) -> str:
        from ringleader.policy.catalog import (
            POLICY_NAMES,  # numpy and scipy: only here
            policy_named,
        )
        from ringleader.spine.needs import RUNTIME, PolicyNotServed, serve_policy

        if value not in POLICY_NAMES:
            raise ValueError(f"unknown {value!r}; choose one of {', '.join(POLICY_NAMES)}")
        try:
            serve_policy(policy_named(value), RUNTIME)
        except PolicyNotServed as err:
            raise ValueError(str(err)) from None
        return value

    @field_validator(
        "probe_window_s", "round_s", "quantum_s", "tiresias_thresholds_gpu_s", mode="before"
    )
    @classmethod
    def _number(cls, value: Any) -> Any:
        # Strict mode refuses ints for floats; YAML writes "30" for 30 seconds.
        if isinstance(value, list):
            return [cls._number(x) for x in value]
        if isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        return value
