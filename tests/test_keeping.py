"""``LastKept`` gives exactly what ``keep_held`` gives, decision after decision."""

import random

import pytest

from ringleader.policy.model.views import ClusterView, Device, JobView
from ringleader.policy.place._incremental.free import FreeGPUs
from ringleader.policy.place._incremental.keeping import LastKept, keep_held
from ringleader.policy.place.type_aware import TypeAware
from tests.helpers import resnet_job


def _outcome(free: FreeGPUs, placed: dict, to_place: list[JobView]) -> tuple:
    # The jobs to place in any order: both place stages sort them by a total key.
    return (
        dict(placed),
        sorted(j.id for j in to_place),
        {n: sorted(g) for n, g in free.free.items()},
        free.total,
    )


def _devices(rng: random.Random, cluster: ClusterView, count: int) -> tuple[Device, ...]:
    every = [Device(n.name, i) for n in cluster.nodes for i in range(n.gpus)]
    return tuple(sorted(rng.sample(every, count)))


def _walk(seed: int, cluster: ClusterView, steps: int = 300):  # type: ignore[no-untyped-def]
    """Decisions' inputs, one event after another: jobs come, go, resize and move; now
    and then two jobs on one GPU (packing), where only the order says who keeps it."""
    rng = random.Random(seed)
    jobs: dict[str, JobView] = {}
    counts: dict[str, int] = {}
    for step in range(steps):
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
        overlap = rng.random() >= 0.8
        if not overlap:
            seen: set[Device] = set()
            for job_id, job in sorted(jobs.items()):
                if counts[job_id] and seen & set(job.devices):
                    counts[job_id] = 0
                if counts[job_id]:
                    seen.update(job.devices)
        views = list(jobs.values())
        rng.shuffle(views)
        yield dict(counts), views, overlap


@pytest.mark.parametrize("seed", range(8))
def test_last_kept_matches_keep_held_while_jobs_come_go_resize_and_overlap(seed: int) -> None:
    cluster = ClusterView.uniform(4, 4)
    kept = LastKept()
    overlapped = reused = 0
    for step, (counts, views, overlap) in enumerate(_walk(seed, cluster)):
        fresh = FreeGPUs(cluster)
        want = _outcome(fresh, *keep_held(counts, views, fresh))
        got = _outcome(*kept.keep_held(counts, views, cluster))
        assert got == want, f"step {step}"
        overlapped += overlap
        reused += kept._free is not None
    assert overlapped > 10 and reused > 100  # both paths were taken


@pytest.mark.parametrize("seed", range(4))
def test_two_keepers_asked_about_the_same_views_never_take_each_others_outcomes(
    seed: int,
) -> None:
    # Each outcome also hangs on its view (views.Memo), marked with its keeper while it
    # is current: one asked every event and one every third see the same view objects.
    cluster = ClusterView.uniform(4, 4)
    often, seldom = LastKept(), LastKept()
    for step, (counts, views, _) in enumerate(_walk(seed, cluster)):
        fresh = FreeGPUs(cluster)
        want = _outcome(fresh, *keep_held(counts, views, fresh))
        assert _outcome(*often.keep_held(counts, views, cluster)) == want, f"step {step}"
        if step % 3 == 0:
            assert _outcome(*seldom.keep_held(counts, views, cluster)) == want, f"step {step}"


@pytest.mark.parametrize("seed", range(3))
def test_type_aware_places_alike_with_its_memo_and_without(seed: int) -> None:
    cluster = ClusterView.typed({"a100": (2, 4), "k80": (2, 4)})
    stage = TypeAware()  # one stage, kept across decisions as a policy keeps it
    for step, (counts, views, _) in enumerate(_walk(seed, cluster, 150)):
        # No more GPUs asked than the cluster has, as the size stage ensures.
        total = 0
        for job_id in sorted(counts):
            total += counts[job_id]
            if total > cluster.capacity:
                total -= counts[job_id]
                counts[job_id] = 0
        want = TypeAware().place(counts, views, cluster)
        assert stage.place(counts, views, cluster) == want, f"step {step}"


def test_the_free_gpus_handed_out_are_a_copy() -> None:
    cluster = ClusterView.uniform(2, 4)
    job = resnet_job("a", workers=2, devices=(Device("node0", 0), Device("node0", 1)))
    kept = LastKept()
    free, placed, _ = kept.keep_held({"a": 2}, [job], cluster)
    free.take("node1", [0, 1, 2, 3])  # the place stage uses what is left
    again, placed_again, _ = kept.keep_held({"a": 2}, [job], cluster)
    assert placed_again == placed == {"a": job.devices}
    assert again.free["node1"] == {0, 1, 2, 3} and again.total == 6


def test_an_error_half_way_leaves_the_next_decision_afresh() -> None:
    cluster = ClusterView.uniform(2, 4)
    a = resnet_job("a", workers=2, devices=(Device("node0", 0), Device("node0", 1)))
    kept = LastKept()
    kept.keep_held({"a": 2}, [a], cluster)
    # "a" left, so its GPUs went back, and then a malformed device raised (a name
    # where a Device belongs: AttributeError in Python, TypeError compiled).
    bad = resnet_job("b", workers=1, devices=("node1:0",))
    with pytest.raises((AttributeError, TypeError)):
        kept.keep_held({"b": 1}, [bad], cluster)
    fresh = FreeGPUs(cluster)
    want = _outcome(fresh, *keep_held({"a": 2}, [a], fresh))
    assert _outcome(*kept.keep_held({"a": 2}, [a], cluster)) == want


def test_a_job_given_twice_is_kept_as_keep_held_keeps_it() -> None:
    cluster = ClusterView.uniform(2, 4)
    a = resnet_job("a", workers=1, devices=(Device("node0", 0),))
    again = resnet_job("a", workers=1, devices=(Device("node1", 0),))
    kept = LastKept()
    for jobs in ([a], [a, again], [a, again], [a], [a, a], [a, a], [a]):
        fresh = FreeGPUs(cluster)
        want = _outcome(fresh, *keep_held({"a": 1}, jobs, fresh))
        assert _outcome(*kept.keep_held({"a": 1}, jobs, cluster)) == want
