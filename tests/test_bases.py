"""Base counts made from the last decision's are those built afresh."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from ringleader.perf.epochs import EpochsToConverge
from ringleader.policy import JobShape, JobView
from ringleader.policy.model.objective import Candidate
from ringleader.policy.size._incremental.bases import MAX_SKIPPED, LastBase
from ringleader.policy.size.allocators import backfill_base, fifo_base

SHAPE = JobShape(50_000, 128, 1e7)


def _job(i: int, rng: random.Random) -> JobView:
    want = rng.choice((1, 1, 2, 4, 8))
    return JobView(
        f"j{i:04d}",
        float(i),
        SHAPE,
        EpochsToConverge.constant(10),
        min_gpus=rng.choice((1, want)),
        max_gpus=want,
        requested_gpus=want,
        elastic=rng.random() < 0.7,
    )


@pytest.mark.parametrize("backfill", [False, True])
@pytest.mark.parametrize("seed", range(12))
def test_base_counts_from_the_last_ones_are_those_built_afresh(seed: int, backfill: bool) -> None:
    rng = random.Random(seed)
    kept = LastBase()
    jobs: list[JobView] = []
    made = 0
    fresh = fifo_base if not backfill else backfill_base
    reordered = placed = 0
    for _ in range(80):
        # Jobs leave, arrive and change their sizes; the order is now and then shuffled
        # a little or a lot; now and then a job is given twice; capacity moves.
        jobs = [j for j in jobs if rng.random() > 0.08]
        for _ in range(rng.choice((0, 1, 1, 3, 20))):
            jobs.append(_job(made, rng))
            made += 1
        jobs = [replace(j, min_gpus=1) if rng.random() < 0.03 else j for j in jobs]
        order = list(jobs)
        roll = rng.random()
        if roll < 0.1 and len(order) > 2:
            i, k = rng.sample(range(len(order)), 2)
            order[i], order[k] = order[k], order[i]
        elif roll < 0.13:
            rng.shuffle(order)
        elif roll < 0.16 and order:
            order.insert(rng.randrange(len(order) + 1), rng.choice(order))  # twice
        elif roll < 0.19 and len(order) > MAX_SKIPPED + 2:
            order.insert(0, order.pop())  # from the back to the front: afresh
        candidates = [Candidate(j, None) for j in order]
        capacity = rng.choice((sum(j.min_gpus for j in jobs), 40, 80, 200))
        got = kept.base(candidates, capacity, backfill)
        built = fresh(candidates, capacity)
        assert got == built
        reordered += list(got) != list(built)  # only the walk puts keys out of order
        # What is kept is the counts handed out, with each of its jobs once (a job given
        # twice, once) beside its count.
        assert kept._counts is got
        assert len(kept._ids) == len(got)
        assert dict(zip(kept._ids, kept._needs, strict=True)) == got
        # Each job's count by its place, for these very jobs and counts alone.
        given = kept.given(candidates, got)
        if given is not None:
            # (a job given twice is given its count at one place at least)
            assert [g or got.get(c.job.id, 0) for g, c in zip(given, candidates, strict=True)] == [
                got.get(c.job.id, 0) for c in candidates
            ]
            assert all(g == got[c.job.id] for g, c in zip(given, candidates, strict=True) if g)
            placed += 1
        assert kept.given(list(candidates), got) is None
        assert kept.given(candidates, dict(got)) is None
    assert reordered  # the walk was taken, and a new job put before old ones
    assert placed > 60


def test_a_size_of_its_own_is_asked_per_job() -> None:
    rng = random.Random(1)
    jobs = [Candidate(_job(i, rng), None) for i in range(30)]
    kept = LastBase()
    for capacity in (10, 30, 30, 5):
        assert kept.base(jobs, capacity, False, lambda c: 2) == fifo_base(
            jobs, capacity, lambda c: 2
        )


def test_counts_changed_by_their_holder_are_not_used() -> None:
    rng = random.Random(2)
    jobs = [Candidate(_job(i, rng), None) for i in range(30)]
    kept = LastBase()
    got = kept.base(jobs, 100, True)
    got.pop(next(iter(got)))
    assert kept.base(jobs, 100, True) == backfill_base(jobs, 100)
