"""How often GPUs and nodes fail, and the outages a run meets: drawn once, before it starts.

A node is out when one of its GPUs fails (``gpu_per_hour`` each), when the node
itself does (host, NIC, software: ``node_per_hour``), for planned maintenance
(``planned_per_hour``, announced: its jobs checkpoint before they stop), or
when its rack's switch fails and takes the rack out (``rack_per_hour``,
optional). Each kind is a Poisson process per GPU, node or rack; a failed node
is back ``repair_s`` later (``planned_s`` for maintenance).

The defaults are Meta's Llama 3 report (Dubey et al. 2024, §3.3.4, Table 5):
in a 54-day snapshot of pre-training on 16,384 H100 GPUs (2,048 nodes of
eight), 466 job interruptions, 47 planned and 419 unexpected, GPU issues 58.7%
of the unexpected. Split that way, per GPU-hour and per node-hour:

    GPU:     0.587 x 419 = 246 over 16,384 GPUs x 1,296 h = 1.158e-5 per GPU-hour
    node:    419 - 246   = 173 over  2,048 nodes x 1,296 h = 6.518e-5 per node-hour
    planned: 47                over  2,048 nodes x 1,296 h = 1.771e-5 per node-hour

so a gang of 16,384 GPUs expects 419 unexpected interruptions in 54 days
(``expected_interruptions``). The report gives no repair time; four hours is a
stated guess, and it matters only to a job that waits for its own nodes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ringleader.policy.model.views import ClusterView

HOUR = 3600.0
LLAMA3_HOURS = 54 * 24
LLAMA3_GPUS = 16_384
LLAMA3_NODES = 2_048
LLAMA3_UNEXPECTED = 419
LLAMA3_PLANNED = 47
LLAMA3_GPU_SHARE = 0.587


class FailureInputError(ValueError):
    """A failure model or scenario setting that cannot be: names the field and the fix."""


@dataclass(frozen=True, slots=True)
class FailureModel:
    """Failure rates and repair times (see the module docstring for the defaults)."""

    gpu_per_hour: float = LLAMA3_GPU_SHARE * LLAMA3_UNEXPECTED / (LLAMA3_GPUS * LLAMA3_HOURS)
    node_per_hour: float = (
        (1 - LLAMA3_GPU_SHARE) * LLAMA3_UNEXPECTED / (LLAMA3_NODES * LLAMA3_HOURS)
    )
    planned_per_hour: float = LLAMA3_PLANNED / (LLAMA3_NODES * LLAMA3_HOURS)
    rack_per_hour: float = 0.0
    repair_s: float = 4 * HOUR
    planned_s: float = 1 * HOUR

    def __post_init__(self) -> None:
        for name in ("gpu_per_hour", "node_per_hour", "planned_per_hour", "rack_per_hour"):
            _at_least(name, getattr(self, name), 0.0, "a rate per hour, 0 for none")
        for name in ("repair_s", "planned_s"):
            _at_least(name, getattr(self, name), 0.0, "seconds a node is out")

    def unexpected_per_hour(self, gpus: int, nodes: int) -> float:
        """Unexpected interruptions an hour of a gang on ``gpus`` GPUs over ``nodes``
        nodes (a rack's failure counted once per node it takes: an upper bound)."""
        return self.gpu_per_hour * gpus + self.node_per_hour * nodes

    def expected_interruptions(self, gpus: int, nodes: int, hours: float) -> float:
        """Unexpected interruptions a gang meets in ``hours`` of running, by the rates."""
        return self.unexpected_per_hour(gpus, nodes) * hours


def _at_least(name: str, value: float, least: float, what: str) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value) and value >= least):
        raise FailureInputError(f"{name}: {value!r} must be a finite number >= {least:g} ({what})")


@dataclass(frozen=True, slots=True)
class Outage:
    """Nodes out from ``at`` to ``until``, and why."""

    at: float
    until: float
    nodes: tuple[str, ...]
    cause: str
    """``gpu``, ``node``, ``rack`` or ``planned``."""

    @property
    def planned(self) -> bool:
        """Announced: the jobs on its nodes checkpoint before they stop, and lose nothing."""
        return self.cause == "planned"


def draw_outages(
    model: FailureModel,
    cluster: ClusterView,
    horizon_s: float,
    *,
    seed: int = 0,
    racks: Mapping[str, Sequence[str]] | None = None,
    start: float = 0.0,
) -> tuple[Outage, ...]:
    """Every outage from ``start`` to ``start + horizon_s``, in time order (ties by node).

    ``racks``: node names by rack, for rack failures (none without it).
    """
    _at_least("horizon_s", horizon_s, 0.0, "seconds to draw failures over")
    rng = np.random.default_rng(seed)
    hours = horizon_s / HOUR
    found: list[Outage] = []
    for node in cluster.nodes:
        for cause, rate, out in (
            ("gpu", model.gpu_per_hour * node.gpus, model.repair_s),
            ("node", model.node_per_hour, model.repair_s),
            ("planned", model.planned_per_hour, model.planned_s),
        ):
            for at in _times(rng, rate * hours, horizon_s):
                found.append(Outage(start + at, start + at + out, (node.name,), cause))
    for names in (racks or {}).values():
        for at in _times(rng, model.rack_per_hour * hours, horizon_s):
            found.append(Outage(start + at, start + at + model.repair_s, tuple(names), "rack"))
    found.sort(key=lambda o: (o.at, o.nodes))
    return tuple(found)


def _times(rng: np.random.Generator, mean: float, horizon_s: float) -> list[float]:
    """Arrival times of a Poisson process with ``mean`` events over ``horizon_s``."""
    count = int(rng.poisson(mean)) if mean > 0 else 0
    return sorted(float(t) for t in rng.uniform(0.0, horizon_s, count))
