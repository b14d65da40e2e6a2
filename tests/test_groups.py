"""Gandiva's admission index: the group it picks is the one a scan of every group picks."""

from __future__ import annotations

import random

from ringleader.policy.gandiva._incremental.openings import Changes, Openings
from ringleader.policy.gandiva.groups import (
    Group,
    _held,
    _resident_order,
    current_groups,
    top,
    turn_order,
)
from ringleader.policy.model.views import Device, JobView
from ringleader.policy.place.fewest_nodes import nodes_spanned
from tests.test_sharing import job

MAX = 4


def scanned(groups: list[Group], new: JobView) -> Group | None:
    """The group ``Sharing`` joined before the index: ``min`` over every open group."""
    fits = [
        g
        for g in groups
        if g.size == new.requested_gpus
        and len(g.residents) < MAX
        and all(r.requested_gpus == g.size for r in g.residents)
    ]
    if not fits:
        return None
    return min(
        fits,
        key=lambda g: (
            top(g) >= new.priority,
            len(g.residents),
            nodes_spanned(g.devices),
            g.devices,
        ),
    )


def some_groups(rng: random.Random) -> list[Group]:
    groups: list[Group] = []
    for n in range(60):
        size = rng.choice((1, 1, 2, 4))
        # One group in three spans two nodes; every group's devices are its own.
        if size > 1 and n % 3 == 0:
            half = size // 2
            devices = tuple(Device(f"n{n:02d}", i) for i in range(half)) + tuple(
                Device(f"m{n:02d}", i) for i in range(size - half)
            )
        else:
            devices = tuple(Device(f"n{n:02d}", i) for i in range(size))
        residents = [
            job(f"g{n}r{k}", gpus=size, priority=rng.choice((0, 0, 1, 5)))
            for k in range(rng.randint(1, MAX))
        ]
        if size > 1 and n % 7 == 0:
            residents = residents[:1]
            residents[0] = job(residents[0].id, gpus=size // 2, max_gpus=size, elastic=True)
        groups.append(Group(devices, residents))
    return groups


def test_openings_admit_each_job_where_a_scan_of_every_group_would() -> None:
    admitted = 0
    for seed in range(20):
        rng = random.Random(seed)
        groups = some_groups(rng)
        copy = [Group(g.devices, list(g.residents)) for g in groups]
        openings = Openings(groups, MAX, Changes())
        for k in range(150):
            if k % 10 == 5:  # a job placed on free GPUs makes a group, as ``Sharing`` does
                size = rng.choice((1, 2, 4))
                devices = tuple(Device(f"x{seed}-{k}", i) for i in range(size))
                arrived = job(f"placed{k}", gpus=size, priority=rng.choice((0, 2)))
                groups.append(Group(devices, [arrived]))
                copy.append(Group(devices, [arrived]))
                openings.added(groups[-1])
            new = job(f"new{k}", gpus=rng.choice((1, 2, 4, 8)), priority=rng.choice((0, 1, 3, 5)))
            expected = scanned(copy, new)
            if expected is not None:
                expected.residents = [*expected.residents, new]
                admitted += 1
            assert openings.admit(new) is (expected is not None)
            assert [g.residents for g in groups] == [g.residents for g in copy], (seed, k)
    assert admitted > 500  # the groups fill up: the test reaches full ones and none


def test_a_group_added_later_is_open_to_the_next_job() -> None:
    groups = [Group((Device("a", 0),), [job("x", priority=3)])]
    openings = Openings(groups, MAX, Changes())
    assert openings.admit(job("w", priority=9))  # one-GPU groups indexed from here on
    later = Group((Device("b", 0),), [job("y")])
    groups.append(later)
    openings.added(later)
    # "a" has two residents now, "b" one, and "b"'s top (0) is below the newcomer's.
    assert openings.admit(job("z", priority=1))
    assert [r.id for r in later.residents] == ["y", "z"]


def test_residents_are_ordered_as_one_sort_of_every_job_orders_them() -> None:
    # ``Sharing`` sorts by (not running, not suspended, priority, arrival, id) without
    # building that key per job; any input order must still give the sort's order.
    rng = random.Random(1)
    for trial in range(200):
        jobs = []
        for _ in range(rng.randint(0, 30)):
            size = rng.choice((1, 2, 4))
            devices = tuple(Device(rng.choice("ab"), rng.randrange(8)) for _d in range(size))
            running = rng.random() < 0.6
            j = job(
                f"j{rng.randrange(50)}",
                gpus=size,
                at=float(rng.randint(0, 4)),
                devices=devices if running else (),
                suspended=running and rng.random() < 0.3,
                priority=rng.choice((0, 0, 0, 1)) if trial % 2 else 0,
            )
            jobs.append(j)
        if trial % 3 == 0:
            jobs.sort(key=lambda j: (j.submitted_at, j.id))
        want = sorted(jobs, key=lambda j: (not j.workers, not j.suspended, *turn_order(j)))
        assert [id(jobs[p]) for p in _resident_order(jobs)] == [id(j) for j in want]
        for j in jobs:
            assert _held(j) == (tuple(sorted(j.devices[: j.workers])) if j.workers else ())


def grouped_by_tuples(
    jobs: list[JobView], max_residents: int
) -> tuple[list[tuple[tuple[Device, ...], list[str]]], list[str], set[Device]]:
    """``current_groups`` as plainly as it can be said: groups keyed by device tuples, a
    job on GPUs another group holds waits (the reference for the claiming shortcuts)."""
    groups: dict[tuple[Device, ...], list[str]] = {}
    owner: dict[Device, tuple[Device, ...]] = {}
    waiting: list[str] = []
    for j in [jobs[p] for p in _resident_order(jobs)]:
        devices = tuple(sorted(j.devices[: j.workers])) if j.workers else ()
        if not devices:
            waiting.append(j.id)
            continue
        if devices not in groups:
            if any(d in owner for d in devices):
                waiting.append(j.id)
                continue
            groups[devices] = []
            owner.update(dict.fromkeys(devices, devices))
        residents = groups[devices]
        size_ok = not residents or j.requested_gpus == len(devices)
        if len(residents) >= max_residents or not size_ok:
            waiting.append(j.id)
            continue
        residents.append(j.id)
    return list(groups.items()), waiting, set(owner)


def test_jobs_on_gpus_another_group_holds_wait_as_a_plain_reference_says() -> None:
    # Gangs on one node claim their node once (``_claim``); gangs over two nodes look
    # each GPU up. Either way a job overlapping a group it does not match waits.
    rng = random.Random(7)
    shapes = 0
    for _trial in range(300):
        jobs = []
        for n in range(rng.randint(1, 40)):
            size = rng.choice((1, 1, 2, 4, 8))
            if size > 1 and rng.random() < 0.25:  # over two nodes
                half = size // 2
                devices = tuple(Device("a", rng.randrange(8)) for _ in range(half)) + tuple(
                    Device("b", rng.randrange(8)) for _ in range(size - half)
                )
            else:
                node = rng.choice("abc")
                start = rng.randrange(8)
                devices = tuple(Device(node, (start + i) % 8) for i in range(size))
            if len(set(devices)) != size:
                continue
            running = rng.random() < 0.8
            jobs.append(
                job(
                    f"j{n}",
                    gpus=size if rng.random() < 0.9 else max(1, size // 2),
                    at=float(rng.randint(0, 5)),
                    devices=devices if running else (),
                    suspended=running and rng.random() < 0.3,
                )
            )
        for again in range(3):
            # Again on the same views, which keep what was read of them (``Held``), and
            # then with some moved in place, as a body moves them.
            if again == 2:
                for j in jobs[::3]:
                    moved = tuple(reversed(j.devices))[: max(1, j.workers - 1)]
                    object.__setattr__(j, "devices", moved)
                    object.__setattr__(j, "workers", len(moved) if j.workers else 0)
            groups, waiting, held = current_groups(jobs, MAX)
            want_groups, want_waiting, want_held = grouped_by_tuples(jobs, MAX)
            got = [(g.devices, [r.id for r in g.residents]) for g in groups]
            assert got == want_groups
            # Each group found on one node is known to be (``Group.one_node``).
            assert [g.one_node for g in groups] == [
                len({d.node for d in g.devices}) == 1 for g in groups
            ]
            assert [j.id for j in waiting] == want_waiting
            assert {
                Device(n, i) for n, bits in held.items() for i in range(8) if bits >> i & 1
            } == (want_held)
        shapes += len(want_waiting) > 0 and len(want_groups) > 1
    assert shapes > 100  # conflicts and groups both met
