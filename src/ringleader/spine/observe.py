"""Observations, kept one way for both bodies: step-time profiles and co-runners.

A job's profile holds, per worker count (running alone) and per partner
(packed on one GPU with that job), its mean minibatch time and how many
seconds it was measured for. The runtime folds one reported minibatch at a
time; the simulator folds a stretch of time at one step time. Both call
``fold``, so a mean means the same thing in both: seconds over minibatches.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ringleader.policy.model.views import Device, Observation


def fold(
    seen: Observation | None, step_time: float, seconds: float, batch_per_worker: float
) -> Observation:
    """``seen`` with ``seconds`` more of minibatches taking ``step_time`` each (at a new
    ``batch_per_worker``, the new step time alone: the mean is of one batch's steps)."""
    if seen is None:
        return Observation(step_time, seconds, batch_per_worker)
    total = seen.seconds + seconds
    if batch_per_worker and batch_per_worker != seen.batch_per_worker and seconds > 0:
        mean = step_time  # a job that changed its batch: its old steps were of another
    elif seen.step_time == step_time or seconds <= 0:
        mean = seen.step_time
    else:
        steps = seen.seconds / seen.step_time + seconds / step_time
        mean = total / steps
    return Observation(mean, total, batch_per_worker or seen.batch_per_worker)


def co_runners(running: Mapping[str, Iterable[Device]]) -> dict[str, tuple[str, ...]]:
    """The other jobs running on any of each job's devices, sorted; jobs alone are left out."""
    # Keyed by (node, index): a tuple hashes in C, a Device through a Python
    # __hash__, and this runs at every placement of a 10k-job simulation.
    keys = [(d.node, d.index) for devices in running.values() for d in devices]
    if len(set(keys)) == len(keys):
        return {}  # no GPU runs two jobs, as is usual: one pass over plain tuples says so
    owners: dict[tuple[str, int], list[str]] = {}
    for job, devices in running.items():
        for d in devices:
            key = (d.node, d.index)
            on = owners.get(key)
            if on is None:
                owners[key] = [job]
            elif on[-1] != job:
                on.append(job)
    partners: dict[str, set[str]] = {}
    for jobs in owners.values():
        if len(jobs) > 1:
            for job in jobs:
                partners.setdefault(job, set()).update(j for j in jobs if j != job)
    return {job: tuple(sorted(others)) for job, others in partners.items()}
