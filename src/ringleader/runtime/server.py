"""``ringleader server``: the API and the controller in one process and one event loop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import uvicorn
from fastapi import FastAPI

from ringleader.credentials import forget_server, record_server
from ringleader.net.agent import TrafficAgent
from ringleader.net.tc import NetCommandError, have_net_admin
from ringleader.policy.catalog import policy_from_config
from ringleader.policy.model.views import ClusterView
from ringleader.runtime.claims import claim_state_dir, listen
from ringleader.runtime.control.config import ControllerConfig
from ringleader.runtime.control.controller import Controller
from ringleader.runtime.control.traffic import TrafficControl, device_mbit
from ringleader.runtime.http.access import known_names
from ringleader.runtime.http.api import create_app
from ringleader.runtime.http.timeouts import BodyDeadline, with_deadlines
from ringleader.runtime.http.usage import keep_sampling
from ringleader.runtime.settings import ConfigError, ServerConfig, check_isolation, check_network
from ringleader.runtime.state.errors import StoreError
from ringleader.runtime.state.store import Store
from ringleader.runtime.state.users import Users
from ringleader.runtime.watch import lost_database, watch_database
from ringleader.runtime.workers.executor.base import Executor
from ringleader.runtime.workers.executor.local import LocalExecutor
from ringleader.runtime.workers.gpus import GpuSpecError
from ringleader.runtime.workers.identity import can_switch
from ringleader.spine.needs import (
    ON_SLURM,
    ON_SLURM_SHARED,
    RUNTIME,
    PolicyNotServed,
    serve_policy,
)

if TYPE_CHECKING:
    from ringleader.runtime.workers.executor.slurm import SlurmExecutor

SHUTDOWN_S = 5
"""Longest a stopping server waits for open requests to finish."""


def _types_said(cluster: ClusterView) -> str:
    if not cluster.heterogeneous and not cluster.types[0]:
        return ""
    counts = ", ".join(f"{t}: {cluster.capacity_of(t)}" for t in cluster.types)
    return f" [{counts}]"


def build(config: ServerConfig) -> tuple[Store, Users, Controller]:
    store = Store(config.state_dir / "ringleader.db")
    users = Users(store.path)
    executor: Executor
    supplied = RUNTIME  # what the executor lets a policy have
    if config.executor == "ray":
        from ringleader.runtime.workers.executor.ray import RayExecutor

        executor = RayExecutor(config.address)
    elif config.executor == "slurm":
        slurm = slurm_executor(config.slurm_partition, config.slurm_url)
        executor, supplied = slurm, ON_SLURM_SHARED if slurm.shares else ON_SLURM
    else:
        try:
            executor = LocalExecutor(config.gpus, warm=config.warm_start)
        except GpuSpecError as err:
            raise ConfigError(str(err)) from None
    chosen = policy_from_config(
        config.policy, config.probe_window_s, config.quantum_s, config.thresholds_gpu_s
    )
    traffic = traffic_control(config, executor)
    body = replace(
        supplied,
        probe_window_s=config.probe_window_s or RUNTIME.probe_window_s,
        traffic=traffic is not None,
    )
    # Refused here, before a job is accepted, if this body cannot run it.
    try:
        policy = serve_policy(chosen, body)
    except PolicyNotServed as err:  # what this executor cannot run
        raise ConfigError(f"--policy: {err}") from None
    if chosen.needs.time_slicing and not policy.needs.time_slicing:
        why = (
            "slurmrestd 22.05 cannot suspend a job (Slurm's commands can: drop --slurm-url)"
            if config.slurm_url
            else "on Slurm a job keeps its GPUs until it exits (a partition with "
            "OverSubscribe=FORCE lets ringleader time-slice and pack: docs/slurm.md)"
        )
        logging.getLogger("ringleader").info(
            "policy %s runs without time-slicing and packing here: %s", chosen.name, why
        )
    if chosen.needs.traffic and traffic is None:
        logging.getLogger("ringleader").info(
            "policy %s ranks the traffic of parameter servers that share a host; give "
            "--traffic-device (as root) to apply the ranks with tc",
            chosen.name,
        )
    controller = Controller(
        store,
        executor,
        ControllerConfig(
            config.state_dir,
            policy,
            round_s=config.round_s,
            tick_s=config.tick_s,
            exit_grace_s=config.exit_grace_s,
            log_cap_bytes=config.log_cap_bytes,
            progress_cap_bytes=config.progress_cap_bytes,
            quotas=users.quotas,
            run_as=users.run_uid if config.isolate_jobs and can_switch() else None,
            traffic=traffic,
        ),
    )
    return store, users, controller


def slurm_executor(partition: str | None = None, url: str | None = None) -> SlurmExecutor:
    """The Slurm executor, through its commands or slurmrestd at ``url``, once Slurm has
    answered (``ConfigError`` naming the fix if not)."""
    from ringleader.runtime.workers.executor.slurm import SlurmExecutor
    from ringleader.slurm.api import SlurmApi, SlurmUnavailable
    from ringleader.slurm.client import Slurm
    from ringleader.slurm.rest import SlurmRest
    from ringleader.slurm.token import TokenError

    slurm: SlurmApi
    if url is None:
        slurm = Slurm(partition=partition)
        fix = (
            "set SLURM_CONF to the cluster's slurm.conf, or run the server where Slurm's "
            "commands reach slurmctld (or give --slurm-url)"
        )
    else:
        try:
            slurm = SlurmRest.from_env(url, partition)
        except TokenError as err:
            raise ConfigError(f"--slurm-url: {err}") from None
        fix = (
            f"check that slurmrestd listens at {url} with rest_auth/jwt, that slurmctld "
            "runs, and that the token (SLURM_JWT or SLURM_JWT_FILE) is current"
        )
    try:
        executor = SlurmExecutor(slurm, shares=slurm.can_suspend and slurm.oversubscribes())
        nodes = executor.cluster().nodes
    except SlurmUnavailable as err:
        raise ConfigError(f"--executor slurm: Slurm did not answer ({err}); {fix}") from None
    if not nodes:
        raise ConfigError(
            "--executor slurm: Slurm lists no usable node with GPUs (GRES gpu); see "
            "docs/slurm.md for the partition and gres.conf ringleader needs"
        )
    return executor


def traffic_control(config: ServerConfig, executor: Executor) -> TrafficControl | None:
    """The tc agent for ``--traffic-device``, its tree installed; None without the flag."""
    device = config.traffic_device
    if device is None:
        return None
    if not re.fullmatch(r"[A-Za-z0-9_.:@-]{1,15}", device) or device in (".", ".."):
        raise ConfigError(
            f"--traffic-device {device!r}: not a network device name (at most 15 letters, "
            "digits and _.:@-; `ip link` lists them)"
        )
    if not isinstance(executor, LocalExecutor):
        raise ConfigError(
            "--traffic-device shapes this host's NIC, where the local executor's parameter "
            "servers send from; with --executor ray they run on other hosts: leave it out"
        )
    ok, why = have_net_admin()
    if not ok:
        raise ConfigError(f"--traffic-device {device}: {why}")
    mbit = config.traffic_mbit or device_mbit(device)
    if mbit is None:
        raise ConfigError(
            f"--traffic-device {device}: its speed is not known (no /sys/class/net/{device}"
            "/speed): give it with --traffic-mbit"
        )
    # Both ways: the local executor's workers are on this host, and their gradients to
    # a PS pass the same device when it is the loopback.
    control = TrafficControl(TrafficAgent(device, mbit, both_ways=True), executor.leaders)
    try:
        control.start()
    except NetCommandError as err:
        raise ConfigError(f"--traffic-device {device}: {err.stderr or err}") from None
    return control


def keep_private(state_dir: Path) -> None:
    """Others may pass through the state dir (to their own job dirs) but not list it,
    and never read the database or the admin token."""
    state_dir.chmod(0o711)
    for name in ("ringleader.db", "ringleader.db-wal", "ringleader.db-shm"):
        path = state_dir / name
        if path.exists() and not path.is_symlink():
            path.chmod(0o600)


class _Uvicorn(uvicorn.Server):
    """uvicorn's server, except that SIGTERM and SIGINT end ``serve()``, not the process.

    uvicorn shuts down gracefully on them, then raises the signal again to
    die of it, which would skip ``serve()``'s own shutdown: the controller
    stopped, the store closed, the CLI's record of this server removed.
    """

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        with super().capture_signals():
            yield
            self._captured_signals.clear()  # handled: we stop as asked, by returning


async def serve(config: ServerConfig) -> None:
    warning = check_network(config)
    check_isolation(config)  # before the state dir is claimed: a refusal leaves no trace
    lock = claim_state_dir(config.state_dir)
    try:
        sock = listen(config.host, config.port)
    except BaseException:
        lock.close()
        raise
    try:
        store, users, controller = build(config)
        token_file = users.ensure_admin(config.state_dir)
        keep_private(config.state_dir)
    except BaseException:
        sock.close()
        lock.close()
        raise
    controller.telemetry.watch(store, lambda: controller.cluster.capacity)
    names = known_names(config.host, config.allow_hosts)
    app = create_app(store, controller, users, names)
    # Outermost: no handler catches its timeout.
    app.add_middleware(BodyDeadline, seconds=config.body_timeout_s)
    server = _http_server(app, config)
    loop_task = asyncio.create_task(controller.run())
    log = logging.getLogger("ringleader")
    _say_started(config, controller, warning, token_file)
    local_url = f"{config.scheme}://127.0.0.1:{config.port}"
    try:
        record_server(config.port, local_url, config.state_dir)
    except OSError as err:  # a read-only home: the CLI then needs RINGLEADER_TOKEN
        log.warning("cannot record this server for the CLI (%s)", err)
    watch = asyncio.create_task(watch_database(store, server, controller))
    sampler = asyncio.create_task(keep_sampling(app.state.usage, store))
    try:
        await server.serve(sockets=[sock])
    finally:
        watch.cancel()
        sampler.cancel()
        forget_server(config.port)
        controller.stop()
        await loop_task
        # Once nothing writes any more: a missing file's last state is copied out.
        lost = store.lost()
        if lost is None and not config.leave_jobs_running:
            stopped = await asyncio.to_thread(controller.leave)
            if stopped:
                log.info("stopped %d jobs; the next server resumes them", stopped)
        rescued = store.rescue() if lost is not None else None
        if controller.config.traffic is not None:
            with contextlib.suppress(OSError, NetCommandError):
                controller.config.traffic.close()
        users.close()
        store.close()
        lock.close()
    if lost is not None:
        raise StoreError(lost_database(store.path, lost, rescued))


def _http_server(app: FastAPI, config: ServerConfig) -> _Uvicorn:
    """uvicorn on the configured address, with deadlines for slow requests."""
    return _Uvicorn(
        uvicorn.Config(
            app,
            host=config.host,
            port=config.port,
            log_level="warning",
            ssl_certfile=config.tls_cert,
            ssl_keyfile=config.tls_key,
            # Deadlines for half-sent requests (runtime/http/timeouts.py).
            http=with_deadlines(config.header_timeout_s, config.body_timeout_s),
            # A client that never finishes (a stuck TLS handshake, a half-sent
            # request) must not keep a stopped server from exiting.
            timeout_graceful_shutdown=SHUTDOWN_S,
        )
    )


def _say_started(
    config: ServerConfig, controller: Controller, warning: str | None, token_file: Path
) -> None:
    """Log where the server listens, on what, and any warning about how it runs."""
    log = logging.getLogger("ringleader")
    if warning:
        log.warning("%s", warning)
    if controller.config.run_as is None:
        log.warning(
            "jobs run as this server's own user (uid %d): a job can read what it can, the "
            "database and tokens included; %s",
            os.geteuid(),
            "--no-isolate-jobs was given"
            if can_switch()
            else "running each user's jobs as their own uid needs the server to run as root",
        )
    log.info(
        "serving on %s, %d GPUs%s (%s), policy %s, state in %s; admin token in %s",
        config.url,
        controller.cluster.capacity,
        _types_said(controller.cluster),
        "real" if getattr(controller.executor, "cuda", False) else "virtual on CPU",
        controller.config.policy.name,
        config.state_dir,
        token_file,
    )
