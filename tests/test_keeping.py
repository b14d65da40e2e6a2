"""``LastKept`` gives exactly what ``keep_held`` gives, decision after decision."""

import random

import pytest

from ringleader.policy.free import FreeGPUs
from ringleader.policy.keeping import LastKept, keep_held
from ringleader.policy.views import ClusterView, Device, JobView
from tests.helpers import resnet_job


def _outcome(free: FreeGPUs, placed: dict, to_place: list[JobView]) -> tuple:
    return (
        list(placed.items()),
        [j.id for j in to_place],
        {n: sorted(g) for n, g in free.free.items()},
        free.total,
    )


def _devices(rng: random.Random, cluster: ClusterView, count: int) -> tuple[Device, ...]:
    every = [Device(n.name, i) for n in cluster.nodes for i in range(n.gpus)]
    return tuple(sorted(rng.sample(every, count)))


@pytest.mark.parametrize("seed", range(8))
def test_last_kept_matches_keep_held_while_jobs_come_go_resize_and_overlap(seed: int) -> None:
    rng = random.Random(seed)
    cluster = ClusterView.uniform(4, 4)
    kept = LastKept()
    jobs: dict[str, JobView] = {}
    counts: dict[str, int] = {}
    overlapped = reused = 0
    for step in range(300):
        # Change a few jobs: new ones, gone ones, a resize, moved GPUs; now and then
        # two jobs on one GPU (packing), where only the order says who keeps it.
        for _ in range(rng.randint(0, 3)):
            kind = rng.random()
            if kind < 0.35 or not jobs:
                job_id = f"j{step}-{rng.randint(0, 999)}"
                held = _devices(rng, cluster, rng.randint(0, 3))
                suspended = bool(held) and rng.random() < 0.2
                jobs[job_id] = resnet_job(
                    job_id, workers=len(held), devices=held, suspended=suspended
                )
                counts[job_id] = rng.choice([0, 1, 2, 3, len(held)])
            elif kind < 0.6:
                gone = rng.choice(sorted(jobs))
                del jobs[gone], counts[gone]
            elif kind < 0.8:
                counts[rng.choice(sorted(jobs))] = rng.randint(0, 4)
            else:
                job_id = rng.choice(sorted(jobs))
                held = _devices(rng, cluster, rng.randint(1, 3))
                jobs[job_id] = resnet_job(job_id, workers=len(held), devices=held)
        # Keep the usual case usual: most decisions have no GPU held twice.
        if rng.random() < 0.8:
            seen: set[Device] = set()
            for job_id, job in sorted(jobs.items()):
                if counts[job_id] and seen & set(job.devices):
                    counts[job_id] = 0
                if counts[job_id]:
                    seen.update(job.devices)
        else:
            overlapped += 1
        views = list(jobs.values())
        rng.shuffle(views)
        fresh = FreeGPUs(cluster)
        want = _outcome(fresh, *keep_held(counts, views, fresh))
        got = _outcome(*kept.keep_held(counts, views, cluster))
        assert got == want, f"step {step}"
        reused += kept._free is not None
    assert overlapped > 10 and reused > 100  # both paths were taken


def test_the_free_gpus_handed_out_are_a_copy() -> None:
    cluster = ClusterView.uniform(2, 4)
    job = resnet_job("a", workers=2, devices=(Device("node0", 0), Device("node0", 1)))
    kept = LastKept()
    free, placed, _ = kept.keep_held({"a": 2}, [job], cluster)
    free.take("node1", [0, 1, 2, 3])  # the place stage uses what is left
    again, placed_again, _ = kept.keep_held({"a": 2}, [job], cluster)
    assert placed_again == placed == {"a": job.devices}
    assert again.free["node1"] == {0, 1, 2, 3} and again.total == 6
