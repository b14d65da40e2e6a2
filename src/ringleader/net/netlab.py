"""``ringleader netlab``: TensorLights measured on real sockets in network namespaces.

Topology (all namespaces created here, named ``rl<pid>…``, deleted on exit,
also on Ctrl-C or an error):

```
PS hosts  rl…p0 … rl…pH ──┐
                           ├── bridge in rl…sw
workers   rl…w0 … rl…wW ──┘
```

Every host has one veth ``eth0`` on the bridge, addresses in 10.250.0.0/16
that exist only inside these namespaces. Each PS host's egress is shaped by a
``TrafficAgent`` to ``link_mbit`` (the same tree for every policy; FIFO just
has no filters), so the PS uplink is the bottleneck. Each job is one emulated
PS plus ``workers`` workers (worker ``i`` of every job lives on worker host
``i``); ``skewed`` puts every PS on one host, ``uniform`` gives each its own.
Priorities come from the policy core's traffic stage, recomputed every 0.2 s
(RoundRobin rotates every ``rr_interval_s``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal

import numpy as np

from ringleader.net.agent import TrafficAgent
from ringleader.net.tc import run
from ringleader.policy.traffic import TrafficPolicy, traffic_priorities

Placement = Literal["skewed", "uniform"]
BASE_PORT = 5000


@dataclass(frozen=True, slots=True)
class NetlabConfig:
    policy: TrafficPolicy
    jobs: int = 3
    placement: Placement = "skewed"
    workers: int = 4
    steps: int = 40
    link_mbit: float = 100.0
    model_bytes: int = 500_000
    grad_bytes: int = 16_000
    compute_ms: float = 50.0
    jitter: float = 0.1
    rr_interval_s: float = 2.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.jobs <= 50:
            raise ValueError(f"jobs must be within 1..50, got {self.jobs}")
        if not 1 <= self.workers <= 32:
            raise ValueError(f"workers must be within 1..32, got {self.workers}")
        if self.steps < 1 or self.link_mbit <= 0 or self.model_bytes < 1:
            raise ValueError("steps, link_mbit and model_bytes must be positive")


@dataclass(frozen=True, slots=True)
class NetlabRun:
    jct_s: tuple[float, ...]
    barrier_waits_s: tuple[float, ...]

    @property
    def avg_jct_s(self) -> float:
        return float(np.mean(self.jct_s))

    @property
    def barrier_wait_var(self) -> float:
        return float(np.var(self.barrier_waits_s))


@dataclass
class Lab:
    """The namespaces and processes of one run; a context manager that always cleans up."""

    config: NetlabConfig
    prefix: str = field(default_factory=lambda: f"rl{os.getpid() % 100000}")
    namespaces: list[str] = field(default_factory=list)
    procs: list[subprocess.Popen[str]] = field(default_factory=list)
    agents: list[TrafficAgent] = field(default_factory=list)

    @property
    def ps_hosts(self) -> int:
        return 1 if self.config.placement == "skewed" else self.config.jobs

    def ps_ns(self, h: int) -> str:
        return f"{self.prefix}p{h}"

    def worker_ns(self, i: int) -> str:
        return f"{self.prefix}w{i}"

    @staticmethod
    def ps_ip(h: int) -> str:
        return f"10.250.1.{h + 1}"

    @staticmethod
    def worker_ip(i: int) -> str:
        return f"10.250.2.{i + 1}"

    def __enter__(self) -> Lab:
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _add_ns(self, name: str) -> None:
        run(["ip", "netns", "add", name])
        self.namespaces.append(name)
        run(["ip", "-n", name, "link", "set", "lo", "up"])

    def _build(self) -> None:
        switch = f"{self.prefix}sw"
        self._add_ns(switch)
        run(["ip", "-n", switch, "link", "add", "br0", "type", "bridge"])
        run(["ip", "-n", switch, "link", "set", "br0", "up"])
        hosts = [(self.ps_ns(h), self.ps_ip(h), f"p{h}") for h in range(self.ps_hosts)]
        hosts += [
            (self.worker_ns(i), self.worker_ip(i), f"w{i}") for i in range(self.config.workers)
        ]
        for ns, ip, short in hosts:
            self._add_ns(ns)
            port = f"v{short}"
            run(
                [
                    "ip",
                    "-n",
                    ns,
                    "link",
                    "add",
                    "eth0",
                    "type",
                    "veth",
                    "peer",
                    "name",
                    port,
                    "netns",
                    switch,
                ]
            )
            run(["ip", "-n", ns, "addr", "add", f"{ip}/16", "dev", "eth0"])
            run(["ip", "-n", ns, "link", "set", "eth0", "up"])
            run(["ip", "-n", switch, "link", "set", port, "master", "br0"])
            run(["ip", "-n", switch, "link", "set", port, "up"])
        for h in range(self.ps_hosts):
            agent = TrafficAgent("eth0", self.config.link_mbit, netns=self.ps_ns(h))
            agent.install()
            self.agents.append(agent)

    def spawn(self, ns: str, args: list[str]) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            ["ip", "netns", "exec", ns, sys.executable, "-m", "ringleader.net.emulator", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.procs.append(proc)
        return proc

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        for agent in self.agents:
            with contextlib.suppress(Exception):  # the namespace goes next anyway
                agent.remove()
        for ns in reversed(self.namespaces):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self.namespaces.clear()


def _job_host(config: NetlabConfig, job: int) -> int:
    return 0 if config.placement == "skewed" else job


def run_once(config: NetlabConfig, timeout_s: float = 300.0) -> NetlabRun:
    """One measured run; every namespace and process is gone when it returns."""
    with Lab(config) as lab:
        start_at = time.time() + 2.0 + 0.05 * config.jobs * (config.workers + 1)
        ps_procs, workers = _spawn_jobs(lab, config, start_at)
        _prioritise_until_done(lab, config, start_at, timeout_s)
        failed = [p for p in lab.procs if p.returncode != 0]
        if failed:
            raise RuntimeError(
                f"emulator failed: {failed[0].stderr.read() if failed[0].stderr else ''}"
            )
        return _measured(ps_procs, workers, start_at)


def _spawn_jobs(
    lab: Lab, config: NetlabConfig, start_at: float
) -> tuple[list[subprocess.Popen[str]], dict[int, list[subprocess.Popen[str]]]]:
    """Each job's PS on its host and its workers on theirs, all to start at ``start_at``."""
    common = [
        "--steps",
        str(config.steps),
        "--model-bytes",
        str(config.model_bytes),
        "--grad-bytes",
        str(config.grad_bytes),
    ]
    ps_procs = []
    for j in range(config.jobs):
        h = _job_host(config, j)
        ps_procs.append(
            lab.spawn(
                lab.ps_ns(h),
                [
                    "ps",
                    "--port",
                    str(BASE_PORT + j),
                    "--host",
                    lab.ps_ip(h),
                    "--workers",
                    str(config.workers),
                    "--start-at",
                    repr(start_at),
                    *common,
                ],
            )
        )
    workers: dict[int, list[subprocess.Popen[str]]] = {}
    for j in range(config.jobs):
        target = f"{lab.ps_ip(_job_host(config, j))}:{BASE_PORT + j}"
        workers[j] = [
            lab.spawn(
                lab.worker_ns(i),
                [
                    "worker",
                    "--ps",
                    target,
                    "--rank",
                    str(i),
                    "--compute-ms",
                    str(config.compute_ms),
                    "--jitter",
                    str(config.jitter),
                    "--start-at",
                    repr(start_at),
                    "--seed",
                    str(config.seed * 10_000 + j * 100 + i),
                    *common,
                ],
            )
            for i in range(config.workers)
        ]
    return ps_procs, workers


def _prioritise_until_done(
    lab: Lab, config: NetlabConfig, start_at: float, timeout_s: float
) -> None:
    """Until every process ends, set each host's traffic priorities as the policy says."""
    deadline = time.time() + timeout_s
    current: dict[int, dict[int, int]] = {}
    while any(p.poll() is None for p in lab.procs):
        if time.time() > deadline:
            raise TimeoutError(f"netlab run did not finish within {timeout_s:.0f} s")
        now = max(0.0, time.time() - start_at)
        for h, agent in enumerate(lab.agents):
            here = [f"job{j}" for j in range(config.jobs) if _job_host(config, j) == h]
            ranks = traffic_priorities(here, config.policy, now, config.rr_interval_s)
            wanted = {BASE_PORT + int(job[3:]): r for job, r in ranks.items()}
            if current.get(h) != wanted:
                agent.apply(wanted)
                current[h] = wanted
        time.sleep(0.2)


def _measured(
    ps_procs: list[subprocess.Popen[str]],
    workers: dict[int, list[subprocess.Popen[str]]],
    start_at: float,
) -> NetlabRun:
    """Each job's completion time, and each worker's barrier waits, from their output."""
    jcts: list[float] = []
    releases: list[dict[int, float]] = []
    for proc in ps_procs:
        assert proc.stdout is not None
        records = [json.loads(line) for line in proc.stdout.read().splitlines()]
        jcts.append(float(records[-1]["end"]) - start_at)
        releases.append({int(r["step"]): float(r["release"]) for r in records if "step" in r})
    # Barrier wait: how long each worker, having pushed its gradient, waits
    # for the rest of its job's gradients before the PS releases the step.
    waits: list[float] = []
    for j, procs in workers.items():
        for proc in procs:
            assert proc.stdout is not None
            for line in proc.stdout.read().splitlines():
                rec = json.loads(line)
                waits.append(max(0.0, releases[j][int(rec["step"])] - float(rec["sent"])))
    return NetlabRun(tuple(jcts), tuple(waits))


def run_netlab(config: NetlabConfig, repeat: int = 1) -> dict[str, Any]:
    runs = [
        run_once(NetlabConfig(**{**_asdict(config), "seed": config.seed + r}))
        for r in range(repeat)
    ]
    return {
        "policy": config.policy.value,
        "placement": config.placement,
        "jobs": config.jobs,
        "workers": config.workers,
        "avg_jct_s": float(np.mean([r.avg_jct_s for r in runs])),
        "barrier_wait_var": float(np.mean([r.barrier_wait_var for r in runs])),
        "repetitions": [
            {
                "avg_jct_s": r.avg_jct_s,
                "jct_s": list(r.jct_s),
                "barrier_wait_var": r.barrier_wait_var,
            }
            for r in runs
        ],
        "config": {
            k: (v.value if isinstance(v, TrafficPolicy) else v) for k, v in _asdict(config).items()
        },
    }


def _asdict(config: NetlabConfig) -> dict[str, Any]:
    return {name: getattr(config, name) for name in config.__slots__}
