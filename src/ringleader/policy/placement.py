"""Which GPUs each job gets: as few nodes per job as possible (SPEC A6).

Jobs whose size did not change keep their GPUs; shrinking jobs keep a subset
(on the nodes where they have most); growing and new jobs are placed largest
first, on one node when any node can hold them (best fit, so big holes stay
big), otherwise on the fewest nodes by taking the emptiest first. Ties go to
the nodes a job already uses, so a resize moves as little as possible.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ringleader.policy.views import ClusterView, Device, JobView


class PlacementError(RuntimeError):
    """The allocation asks for more GPUs than the cluster has free."""


def _keep_subset(devices: Sequence[Device], count: int) -> tuple[Device, ...]:
    per_node: dict[str, int] = {}
    for d in devices:
        per_node[d.node] = per_node.get(d.node, 0) + 1
    ranked = sorted(devices, key=lambda d: (-per_node[d.node], d.node, d.index))
    return tuple(sorted(ranked[:count]))


def place(
    counts: Mapping[str, int], jobs: Sequence[JobView], cluster: ClusterView
) -> dict[str, tuple[Device, ...]]:
    """Devices for every job with a non-zero count in ``counts``."""
    free: dict[str, set[int]] = {n.name: set(range(n.gpus)) for n in cluster.nodes}
    placed: dict[str, tuple[Device, ...]] = {}
    to_place: list[JobView] = []
    for job in jobs:
        want = counts.get(job.id, 0)
        current = tuple(d for d in job.devices if d.index in free.get(d.node, ()))
        if want == 0:
            continue
        if current and len(current) >= want:
            kept = current if len(current) == want else _keep_subset(current, want)
            for d in kept:
                free[d.node].discard(d.index)
            placed[job.id] = kept
        else:
            to_place.append(job)
    order = {n.name: i for i, n in enumerate(cluster.nodes)}
    to_place.sort(key=lambda j: (-counts[j.id], j.submitted_at, j.id))
    for job in to_place:
        placed[job.id] = _place_one(job, counts[job.id], free, order)
    return placed


def _place_one(
    job: JobView, want: int, free: dict[str, set[int]], order: Mapping[str, int]
) -> tuple[Device, ...]:
    own = {d.node for d in job.devices}
    if sum(len(f) for f in free.values()) < want:
        raise PlacementError(f"job {job.id} needs {want} GPUs but fewer are free")
    fits = [n for n, f in free.items() if len(f) >= want]
    if fits:
        best = min(fits, key=lambda n: (len(free[n]), n not in own, order[n]))
        chosen = [best]
    else:
        chosen = []
        total = 0
        for n in sorted(free, key=lambda n: (-len(free[n]), n not in own, order[n])):
            if total >= want:
                break
            if free[n]:
                chosen.append(n)
                total += len(free[n])
    previous = {(d.node, d.index) for d in job.devices}
    devices: list[Device] = []
    for n in chosen:
        take = min(want - len(devices), len(free[n]))
        indices = sorted(free[n], key=lambda i: ((n, i) not in previous, i))[:take]
        for i in indices:
            free[n].discard(i)
            devices.append(Device(n, i))
    return tuple(sorted(devices))
