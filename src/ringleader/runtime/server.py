"""``ringleader server``: the API and the controller in one process and one event loop."""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO

import uvicorn

from ringleader.policy.catalog import policy_from_config
from ringleader.runtime.api import create_app
from ringleader.runtime.bounded import LOG_CAP_BYTES, PROGRESS_CAP_BYTES
from ringleader.runtime.controller import Controller, ControllerConfig
from ringleader.runtime.executor.base import Executor
from ringleader.runtime.executor.local import LocalExecutor
from ringleader.runtime.store import Store, StoreError
from ringleader.spine.needs import RUNTIME, serve_policy

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


def default_state_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "ringleader"


@dataclass(frozen=True, slots=True)
class ServerConfig:
    state_dir: Path
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    gpus: int | None = None
    policy: str = "elastic"
    probe_window_s: float | None = None
    round_s: float = 30.0
    tick_s: float = 0.5
    quantum_s: float | None = None
    executor: str = "local"
    address: str = "auto"
    warm_start: bool = True
    log_cap_bytes: int = LOG_CAP_BYTES
    progress_cap_bytes: int = PROGRESS_CAP_BYTES


def claim_state_dir(state_dir: Path) -> IO[str]:
    """Hold the state dir's lock for as long as the returned file stays open.

    Two servers on one state dir would both launch every queued job. The lock
    is an ``flock``, so the kernel drops it when the server dies, ``kill -9``
    included, and the next server starts at once.
    """
    Store.check_dir(state_dir)
    lock = open(state_dir / "server.lock", "a+")  # noqa: SIM115 - held until exit
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        holder = lock.read().strip() or "unknown"
        lock.close()
        raise StoreError(
            f"state dir {state_dir} is in use by another ringleader server (pid {holder}); "
            "stop it, or give this one its own --state-dir"
        ) from None
    lock.seek(0)
    lock.truncate()
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    return lock


def build(config: ServerConfig) -> tuple[Store, Controller]:
    store = Store(config.state_dir / "ringleader.db")
    executor: Executor
    if config.executor == "ray":
        from ringleader.runtime.executor.ray import RayExecutor

        executor = RayExecutor(config.address)
    else:
        executor = LocalExecutor(config.gpus, warm=config.warm_start)
    chosen = policy_from_config(config.policy, config.probe_window_s, config.quantum_s)
    body = (
        RUNTIME
        if config.probe_window_s is None
        else replace(RUNTIME, probe_window_s=config.probe_window_s)
    )
    # Refused here, before a job is accepted, if this body cannot run it.
    policy = serve_policy(chosen, body)
    controller = Controller(
        store,
        executor,
        ControllerConfig(
            config.state_dir,
            policy,
            round_s=config.round_s,
            tick_s=config.tick_s,
            log_cap_bytes=config.log_cap_bytes,
            progress_cap_bytes=config.progress_cap_bytes,
        ),
    )
    return store, controller


async def serve(config: ServerConfig) -> None:
    lock = claim_state_dir(config.state_dir)
    try:
        store, controller = build(config)
    except BaseException:
        lock.close()
        raise
    app = create_app(store, controller)
    server = uvicorn.Server(
        uvicorn.Config(app, host=config.host, port=config.port, log_level="warning")
    )
    loop_task = asyncio.create_task(controller.run())
    logging.getLogger("ringleader").info(
        "serving on http://%s:%d, %d GPUs (%s), policy %s, state in %s",
        config.host,
        config.port,
        controller.cluster.capacity,
        "real" if getattr(controller.executor, "cuda", False) else "virtual on CPU",
        controller.config.policy.name,
        config.state_dir,
    )
    try:
        await server.serve()
    finally:
        controller.stop()
        await loop_task
        store.close()
        lock.close()
