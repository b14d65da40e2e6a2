"""``sim.occupancy.Occupancy`` counts by change what a placement would count afresh."""

from __future__ import annotations

import random

from ringleader.policy.model.plan import Assignment, Plan
from ringleader.policy.model.views import Device
from ringleader.sim.occupancy import Occupancy


def _from_scratch(jobs: dict[str, Assignment]) -> tuple[int, int, int]:
    """Busy and held GPUs as a plan counts them, and GPUs that two jobs run on."""
    plan = Plan(dict(jobs))
    runs: dict[tuple[str, int], set[str]] = {}
    for job, a in jobs.items():
        if a.running:
            for d in a.active_devices:
                runs.setdefault((d.node, d.index), set()).add(job)
    return plan.busy_gpus, plan.held_gpus, sum(1 for on in runs.values() if len(on) > 1)


def test_occupancy_matches_counting_afresh_through_random_placements() -> None:
    rng = random.Random(7)
    gpus = [Device(f"n{n}", i) for n in range(3) for i in range(4)]
    jobs: dict[str, Assignment] = {}
    occupancy = Occupancy()
    shared_seen = 0
    for _ in range(3000):
        job = f"j{rng.randrange(8)}"
        old = jobs.pop(job, None)
        if rng.random() < 0.8:  # placed again (packed, suspended or reserved), or gone
            if old is not None and rng.random() < 0.5:  # on the same GPUs: a turn
                devices = old.devices
            else:
                devices = tuple(rng.sample(gpus, rng.randint(1, 4)))
            new = Assignment(devices, rng.randint(0, len(devices)), rng.random() < 0.2)
            jobs[job] = new
            if old is None:
                occupancy.add(new.devices, new.workers, new.suspended)
            else:
                was = (old.devices, old.workers, old.suspended)
                occupancy.change(was, new.devices, new.workers, new.suspended)
        elif old is not None:
            occupancy.remove(old.devices, old.workers, old.suspended)
        busy, held, shared = _from_scratch(jobs)
        assert (occupancy.busy, occupancy.held, occupancy.shared) == (busy, held, shared)
        shared_seen += shared > 0
    assert shared_seen > 100  # packed GPUs were part of what was checked


def test_a_job_that_leaves_gives_back_every_gpu() -> None:
    occupancy = Occupancy()
    devices = (Device("n0", 0), Device("n0", 1))
    occupancy.add(devices, 2, False)
    occupancy.add(devices[:1], 1, False)
    assert (occupancy.busy, occupancy.held, occupancy.shared) == (2, 2, 1)
    occupancy.remove(devices, 2, False)
    assert (occupancy.busy, occupancy.held, occupancy.shared) == (1, 1, 0)
    occupancy.remove(devices[:1], 1, False)
    assert (occupancy.busy, occupancy.held, occupancy.shared) == (0, 0, 0)
