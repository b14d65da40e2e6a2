"""A decision's assignments made from the last one's are those built afresh, in order."""

from __future__ import annotations

import random

import pytest

from ringleader.perf.epochs import EpochsToConverge
from ringleader.policy import JobShape, JobView
from ringleader.policy.model.plan import WAIT, Assignment
from ringleader.policy.model.views import Device
from ringleader.policy.pipeline._incremental.assigning import LastAssignments

SHAPE = JobShape(50_000, 128, 1e7)
DEVICES = [tuple(Device(f"n{n}", i) for i in range(k)) for n in range(3) for k in (1, 2, 4)]


def _job(i: int, at: float) -> JobView:
    return JobView(f"j{i:04d}", at, SHAPE, EpochsToConverge.constant(10))


def _plain(last: dict[str, Assignment], put: list[tuple[str, Assignment]]) -> dict[str, Assignment]:
    """What the decision built before: a new dict, in the order put, with the last
    decision's object for a job whose assignment is equal to it."""
    out: dict[str, Assignment] = {}
    for job_id, a in put:
        prev = last.get(job_id)
        out[job_id] = prev if prev is not None and prev == a and a is not WAIT else a
    return out


@pytest.mark.parametrize("seed", range(20))
def test_assignments_made_from_the_last_ones_are_those_built_afresh(seed: int) -> None:
    rng = random.Random(seed)
    kept = LastAssignments()
    jobs: list[JobView] = []
    made = 0
    rebuilt = walked = 0
    for _ in range(60):
        # Some jobs leave, some arrive (now and then one submitted before others), and
        # the rest keep or change their assignments.
        jobs = [j for j in jobs if rng.random() > 0.1]
        for _ in range(rng.choice((0, 0, 1, 3))):
            at = float(made) if rng.random() < 0.9 else rng.uniform(0, made)
            jobs.append(_job(made, at))
            made += 1
        jobs.sort(key=lambda j: (j.submitted_at, j.id))
        order = list(jobs)
        if rng.random() < 0.05 and len(order) > 2:
            i, k = rng.sample(range(len(order)), 2)
            order[i], order[k] = order[k], order[i]  # put out of the last order
        last = kept.assignments
        before = list(last.items())
        put: list[tuple[str, Assignment]] = []
        assigning = kept.start()
        for job in order:
            prev = last.get(job.id)
            if prev is not None and prev is not WAIT and rng.random() < 0.7:
                devices, workers = prev.devices, prev.workers  # kept (an equal tuple, or itself)
                devices = devices if rng.random() < 0.5 else tuple(devices)
            elif rng.random() < 0.3:
                devices, workers = None, 0
            else:
                devices = rng.choice(DEVICES)
                workers = rng.randint(1, len(devices))
            assigning.put(job.id, devices, workers)
            put.append((job.id, WAIT if devices is None else Assignment(devices, workers)))
        rebuilt += assigning._rebuild
        walked += not assigning._rebuild and bool(last)
        got = assigning.done(order)
        want = _plain(last, put)
        assert list(got.items()) == list(want.items())  # the same, in the same order
        assert all(got[k] is want[k] for k in want if want[k] is last.get(k))  # the same objects
        assert list(last.items()) == before  # the last decision's dict is not changed
        kept.assignments = got
    assert rebuilt > 0 and walked > 0  # both ways were taken


def test_again_gives_the_last_object_while_unchanged_found_on_the_view_or_by_id() -> None:
    from dataclasses import replace

    kept = LastAssignments()
    a = replace(_job(1, 0.0), devices=DEVICES[0], workers=1)
    first = kept.again(a, DEVICES[0], 1)
    assert first == Assignment(DEVICES[0], 1)
    kept.assignments = {a.id: first}
    assert kept.again(a, DEVICES[0], 1) is first  # on the view
    assert kept.again(replace(a), DEVICES[0], 1) is first  # a new view: by id
    paused = kept.again(a, DEVICES[0], 1, True)
    assert paused == Assignment(DEVICES[0], 1, True) and paused is not first
    assert kept.again(a, DEVICES[0], 1, True) is paused  # the view keeps the latest
    moved = kept.again(a, DEVICES[1], 2)
    assert moved == Assignment(DEVICES[1], 2)
    other = LastAssignments()  # another keeper never takes this one's
    assert other.again(a, DEVICES[1], 2) is not moved
    assert kept.again(a, DEVICES[1], 2) is moved  # each keeper keys its own slot of the memo
