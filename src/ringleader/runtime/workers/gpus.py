"""Which devices this machine offers, and of what GPU type.

``--gpus`` takes a count (``4``: untyped devices) or a type mix
(``v100:2,k80:2``: typed virtual devices, for trying a heterogeneous policy on
a laptop). On a machine with NVIDIA GPUs the types are read from the
driver (``nvidia-smi``, which asks NVML), and ``--gpus`` may only lower the
count: a type cannot be made up for a real card.

The local executor groups a machine's devices by type into one node per type
(``local-v100``, ``local-k80``), so the policy core's one-type-per-node model
holds; ``GpuLayout.physical`` maps a device back to the index CUDA knows it by.
An untyped machine keeps its single node ``local``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from ringleader.perf.gpu_types import type_speeds
from ringleader.policy.model.views import GPU_TYPE_PATTERN, ClusterView, Device, Node, Observation

NODE = "local"
MAX_GPUS = 4096
TYPE_NAME = re.compile(GPU_TYPE_PATTERN)


class GpuSpecError(ValueError):
    """``--gpus`` does not say a count or a type mix; the message says how to write it."""


@dataclass(frozen=True, slots=True)
class GpuLayout:
    """This machine's devices: per GPU type, the CUDA indices of its devices."""

    groups: tuple[tuple[str, tuple[int, ...]], ...]

    @classmethod
    def untyped(cls, count: int) -> GpuLayout:
        return cls((("", tuple(range(count))),))

    @property
    def total(self) -> int:
        return sum(len(indices) for _, indices in self.groups)

    @property
    def typed(self) -> bool:
        return any(t for t, _ in self.groups)

    def nodes(self) -> tuple[Node, ...]:
        if not self.typed:
            return (Node(NODE, self.total),)
        return tuple(Node(f"{NODE}-{t}", len(ix), gpu_type=t) for t, ix in self.groups)

    def physical(self, device: Device) -> int:
        """The index of ``device`` among the machine's devices (CUDA's, on GPUs)."""
        if not self.typed:
            return device.index
        for t, indices in self.groups:
            if device.node == f"{NODE}-{t}":
                return indices[device.index]
        raise KeyError(f"no device {device.node}:{device.index} on this machine")

    def describe(self) -> str:
        if not self.typed:
            return str(self.total)
        return ",".join(f"{t}:{len(ix)}" for t, ix in self.groups)

    def limit(self, count: int) -> GpuLayout:
        """The first ``count`` devices (``--gpus N`` on a machine with more GPUs)."""
        left, groups = count, []
        for t, indices in self.groups:
            if left <= 0:
                break
            groups.append((t, indices[:left]))
            left -= len(indices[:left])
        return GpuLayout(tuple(groups))


def parse_gpus(text: str) -> GpuLayout:
    """``"4"`` or ``"v100:2,k80:2"`` as a layout of virtual devices (``GpuSpecError``)."""
    text = text.strip()
    how = "give a count (--gpus 4) or GPU types and counts (--gpus v100:2,k80:2)"
    if not text:
        raise GpuSpecError(f"--gpus: empty; {how}")
    if text.isdigit():
        count = int(text)
        if not 1 <= count <= MAX_GPUS:
            raise GpuSpecError(f"--gpus: {count} is not within 1..{MAX_GPUS}")
        return GpuLayout.untyped(count)
    groups: list[tuple[str, tuple[int, ...]]] = []
    seen: set[str] = set()
    start = 0
    for part in text.split(","):
        name, sep, count_text = part.strip().partition(":")
        name = name.strip()
        if not sep or not count_text.strip().isdigit():
            raise GpuSpecError(f"--gpus: {part.strip()!r} is not TYPE:COUNT; {how}")
        if not TYPE_NAME.match(name):
            raise GpuSpecError(
                f"--gpus: GPU type {name!r} must be lower-case letters, digits, '_', '.' or '-' "
                "(at most 32), for example v100"
            )
        if name in seen:
            raise GpuSpecError(f"--gpus: GPU type {name!r} is given twice; give each type once")
        count = int(count_text)
        if count < 1:
            raise GpuSpecError(f"--gpus: {name}:{count} needs at least 1 device; leave it out")
        seen.add(name)
        groups.append((name, tuple(range(start, start + count))))
        start += count
    if start > MAX_GPUS:
        raise GpuSpecError(f"--gpus: {start} devices in all is more than {MAX_GPUS}")
    return GpuLayout(tuple(groups))


def type_name(product: str) -> str:
    """A short type name from a card's product name: ``NVIDIA H100 80GB HBM3`` → ``h100``,
    ``Tesla V100-SXM2-16GB`` → ``v100``, ``NVIDIA GeForce RTX 4090`` → ``rtx4090``."""
    words = product.lower().replace("nvidia", " ").replace("tesla", " ").replace("geforce", " ")
    tokens = [t for t in re.split(r"[\s]+", words.strip()) if t]
    if not tokens:
        return "gpu"
    first = tokens[0].split("-")[0]
    if first in ("rtx", "gtx", "quadro", "titan") and len(tokens) > 1:
        first = first + tokens[1].split("-")[0]
    name = re.sub(r"[^a-z0-9_.-]", "", first)[:32]
    return name if name and TYPE_NAME.match(name) else "gpu"


def detect() -> GpuLayout | None:
    """This machine's NVIDIA GPUs grouped by type, in CUDA's order; None without a driver."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run(
            [smi, "--query-gpu=index,name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    by_type: dict[str, list[int]] = {}
    for line in out.splitlines():
        index, sep, name = line.partition(",")
        if sep and index.strip().isdigit():
            by_type.setdefault(type_name(name.strip()), []).append(int(index.strip()))
    if not by_type:
        return None
    return GpuLayout(tuple((t, tuple(ix)) for t, ix in by_type.items()))


# What the controller says of types: in views, in events, in the API.


def type_of(cluster: ClusterView, node: str) -> str:
    """``node``'s GPU type; "" for a node that left (Ray) or a cluster without types."""
    try:
        return cluster.type_of(node)
    except KeyError:
        return ""


def gang_type(cluster: ClusterView, devices: Iterable[tuple[str, int]]) -> str:
    """The one GPU type a gang runs on; "" for several (it runs at the slowest's pace,
    which says nothing of any one type) or none."""
    types = {type_of(cluster, node) for node, _ in devices}
    return types.pop() if len(types) == 1 else ""


def device_types(cluster: ClusterView, devices: Sequence[str]) -> list[str]:
    """The GPU type of each ``node:index`` (an empty list where the cluster names none)."""
    if not any(cluster.types):
        return []
    return [type_of(cluster, d.rpartition(":")[0]) for d in devices]


def types_detail(cluster: ClusterView, devices: Sequence[tuple[str, int]]) -> dict[str, list[str]]:
    """``{"gpu_types": [...]}`` for a launch event, where the cluster names types."""
    if not any(cluster.types):
        return {}
    return {"gpu_types": [type_of(cluster, node) for node, _ in devices]}


def measured_speeds(
    cluster: ClusterView, table: Mapping[str, list[float]]
) -> dict[str, float] | None:
    """A job's speed on each of the cluster's types, from its per-type step times: measured
    where it ran, estimated elsewhere (``perf.gpu_types.type_speeds``); None on one type."""
    if not table or not cluster.heterogeneous:
        return None
    steps = type_step_times(table)
    return dict(type_speeds(steps, cluster.types).speeds) or None


EFFECTIVE = "attained_effective_s"
"""The row's ``shape`` key for its attained service in its best type's terms."""


def effective_weight(
    cluster: ClusterView, devices: Sequence[tuple[str, int]], table: Mapping[str, list[float]]
) -> float:
    """What a GPU-second on ``devices`` is worth to the job, in its fastest type's
    GPU-seconds: its speed on the slowest type held over its best (1.0 unmeasured)."""
    speeds = measured_speeds(cluster, table)
    if not speeds:
        return 1.0
    held = {type_of(cluster, node) for node, _ in devices}
    return min((speeds.get(t, 1.0) for t in held), default=1.0) / max(speeds.values())


def observations_in_best_terms(
    speeds: Mapping[str, float] | None,
    table: Mapping[str, list[float]],
    raw: Mapping[int, Observation],
) -> dict[int, Observation]:
    """The job's step times per world size, in its fastest measured type's terms.

    On a cluster of mixed types a job's raw ``observations`` mix step times from
    every type it ran on; its speed model must describe one type, the one its
    ``type_speed`` is relative to (its fastest, 1.0), as in the simulator. Each
    type's step times are scaled by that type's speed (a K80 step of 4 s at
    speed 0.25 is a 1 s step on the fastest), and merged per world size by
    minibatches. A world size measured only on a gang spread over types keeps
    its raw observation. ``speeds``: ``measured_speeds`` of ``table`` (None on a
    cluster of one type).
    """
    if not speeds:
        return dict(raw)
    seconds: dict[int, float] = {}
    steps: dict[int, float] = {}
    batch: dict[int, float] = {}
    for gpu_type, w, entry in _measured(table):
        if entry[0] <= 0:
            continue
        scaled = entry[0] * speeds.get(gpu_type, 1.0)
        seconds[w] = seconds.get(w, 0.0) + entry[1]
        steps[w] = steps.get(w, 0.0) + entry[1] / scaled
        batch[w] = entry[3]
    out = dict(raw)
    for w, s in seconds.items():
        if steps[w] > 0:
            out[w] = Observation(s / steps[w], s, int(batch[w]) or 1)
    return out


def speeds_shown(
    cluster: ClusterView, table: Mapping[str, list[float]]
) -> dict[str, dict[str, float | bool | None]] | None:
    """For ``GET /jobs/{id}``: per type of a mixed cluster, the job's relative speed, its
    mean step time where measured, and whether the speed is an estimate."""
    if not cluster.heterogeneous:
        return None
    steps = type_step_times(table)
    known = type_speeds(steps, cluster.types)
    if not known.speeds:
        return None
    return {
        t: {
            "relative_speed": round(known.speeds[t], 4),
            "step_time_s": steps.get(t),
            "estimated": t in known.estimated,
        }
        for t in cluster.types
        if t in known.speeds
    }


def type_step_times(table: Mapping[str, list[float]]) -> dict[str, float]:
    """Each GPU type's mean step time, from ``{"type/world": entry}``, compared at one
    world size: the size measured on the most types (ties: the smaller). A type
    measured only at other sizes is left out, for ``perf.gpu_types.type_speeds`` to
    estimate from the others rather than compare step times of different sizes."""
    by_world: dict[int, dict[str, float]] = {}
    for gpu_type, world, entry in _measured(table):
        by_world.setdefault(world, {})[gpu_type] = entry[0]
    if not by_world:
        return {}
    size = min(by_world, key=lambda w: (-len(by_world[w]), w))
    return by_world[size]


def _measured(table: Mapping[str, list[float]]) -> Iterator[tuple[str, int, list[float]]]:
    """``(type, world size, entry)`` of each ``"type/world"`` entry with steps in it."""
    for key, entry in table.items():
        gpu_type, _, world = key.rpartition("/")
        if gpu_type and world.isdigit() and entry[2] > 0:
            yield gpu_type, int(world), entry
