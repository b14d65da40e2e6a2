"""Gandiva's groups kept across decisions: every plan the same as from groups found afresh."""

from __future__ import annotations

import pickle
import random
from dataclasses import replace

import pytest

from ringleader.policy.gandiva._incremental.regroup import LastGroups
from ringleader.policy.gandiva.groups import Group, current_groups
from ringleader.policy.gandiva.sharing import Sharing
from ringleader.policy.model.plan import Plan
from ringleader.policy.model.views import ClusterView, Device, JobView
from tests.test_sharing import job

CLUSTER = ClusterView.uniform(6, 4)


def _same(a: Plan, b: Plan) -> None:
    assert dict(a.assignments) == dict(b.assignments)
    assert a.wake_at == b.wake_at and a.settled == b.settled
    assert dict(a.turns) == dict(b.turns)
    assert dict(a.sizing) == dict(b.sizing)


def _carry_out(jobs: list[JobView], plan: Plan, now: float, rng: random.Random) -> None:
    """The plan's moves, as bodies make them: most in a new view, some moved in place
    (``spine.views.placement_view``), and now and then one left as it was (not yet
    carried out)."""
    for k, view in enumerate(jobs):
        a = plan.of(view.id)
        if (a.devices, a.workers, a.suspended) == (view.devices, view.workers, view.suspended):
            continue
        if rng.random() < 0.1:
            continue
        running = a.workers > 0 and not a.suspended
        since = view.state_since if running == view.running else now
        if rng.random() < 0.4:
            for name, value in (
                ("devices", a.devices),
                ("workers", a.workers),
                ("suspended", a.suspended),
                ("state_since", since),
            ):
                object.__setattr__(view, name, value)
        else:
            jobs[k] = replace(
                view, devices=a.devices, workers=a.workers, suspended=a.suspended, state_since=since
            )


def _arrival(rng: random.Random, n: int, now: float) -> JobView:
    size = rng.choice((1, 1, 1, 2, 4))
    elastic = size == 1 and rng.random() < 0.2
    return job(
        f"j{n:04d}",
        gpus=size,
        at=now,
        priority=rng.choice((0, 0, 0, 1, 2)),
        alone=rng.choice((None, 0.1, 0.2)),
        packed={f"j{rng.randrange(max(1, n)):04d}": rng.choice((0.12, 0.3))},
        elastic=elastic,
        max_gpus=4 if elastic else None,
    )


@pytest.mark.parametrize("name", ["gandiva", "time-slicing"])
@pytest.mark.parametrize("seed", range(4))
def test_kept_groups_give_the_plans_of_groups_found_afresh(name: str, seed: int) -> None:
    rng = random.Random(seed)
    packing = name == "gandiva"
    kept = Sharing(name, packing=packing)
    jobs: list[JobView] = []
    made = 0
    kept_again = 0
    for step in range(160):
        now = step * 17.0
        filling = step // 20 % 2 == 0  # by turns the cluster fills, then empties
        for _ in range(rng.choice((0, 1, 1, 2, 6) if filling else (0, 0, 0, 1))):
            jobs.append(_arrival(rng, made, now))
            made += 1
        for _ in range(rng.choice((0, 1) if filling else (0, 1, 2, 3))):  # jobs end
            if jobs:
                del jobs[rng.randrange(len(jobs))]
        if rng.random() < 0.05:  # a body hands its views over in another order
            rng.shuffle(jobs)
        got = kept.decide(list(jobs), CLUSTER, now)
        want = Sharing(name, packing=packing).decide(list(jobs), CLUSTER, now)
        _same(got, want)
        if kept.memory.kept.groups._kept:  # and what it keeps is what the views say, as found
            kept_again += 1
            assert _found(list(kept.memory.kept.groups._founded.values())) == _found(
                current_groups(list(jobs), kept.max_residents)[0]
            )
        _carry_out(jobs, got, now, rng)
    assert made > 150
    assert kept_again > 40  # the kept groups were used, not only found afresh
    # What is kept is for the views at hand: a pickled stack arrives with none.
    again = pickle.loads(pickle.dumps(kept))
    assert kept.memory.kept.groups._kept and not again.memory.kept.groups._kept


def test_kept_groups_are_those_current_groups_finds() -> None:
    # Views moved in place (suspended, resumed, fewer workers on the same devices),
    # new views, jobs leaving and coming, devices in any order, and now and then a
    # job put on GPUs another group holds (found afresh then).
    rng = random.Random(11)
    last = LastGroups()
    jobs = [_placed(rng, n) for n in range(60)]
    kept = 0
    before: dict[int, Group] = {}
    for step in range(300):
        groups, waiting, held = last.current(list(jobs), 3)
        want_groups, want_waiting, want_held = current_groups(list(jobs), 3)
        assert _found(groups) == _found(want_groups)
        assert sorted(j.id for j in waiting) == sorted(j.id for j in want_waiting)
        assert held == want_held
        # Kept last time, and no overlap nor id given twice now: the kept groups were
        # changed, not found afresh (most are the same objects).
        clean = not any(j.workers for j in want_waiting) and len({j.id for j in jobs}) == len(jobs)
        if before and clean:
            kept += 1
            assert sum(id(g) in before for g in groups) > len(groups) // 2
        before = {id(g): g for g in groups} if last._kept else {}
        # A decision's change to a group handed out is put back once it is done.
        if groups:
            g = groups[0]
            was = (g.residents, list(g.residents), g.devices)
            last.changes.change(g)
            g.residents = [*g.residents, jobs[-1]]
            g.move((), False)
        last.done()
        if groups:
            assert (g.residents, list(g.residents), g.devices) == was
        for n in range(rng.choice((1, 1, 2, 5))):
            _move(rng, jobs, 100 + 10 * step + n)
        # Overlaps and a job given twice are seen once or twice, then mended: the job
        # that waits moved off, the second view dropped.
        if not clean and rng.random() < 0.6:
            overlapping = {j.id for j in want_waiting if j.workers}
            jobs = [replace(j, devices=(), workers=0) if j.id in overlapping else j for j in jobs]
            jobs = list({j.id: j for j in reversed(jobs)}.values())[::-1]
    assert kept > 100


def _placed(rng: random.Random, n: int) -> JobView:
    """A job on a node of its own (one in four holding none), its devices in any order."""
    size = rng.choice((1, 2, 2, 4))
    devices = list(_on(n, size))
    rng.shuffle(devices)
    holds = rng.random() < 0.75
    return job(
        f"a{n:04d}",
        gpus=size,
        at=float(n),
        priority=rng.choice((0, 0, 1)),
        devices=tuple(devices) if holds else (),
        suspended=holds and rng.random() < 0.3,
    )


def _move(rng: random.Random, jobs: list[JobView], n: int) -> None:
    """One change to ``jobs`` (``n``: a number no other new job or node has)."""
    k = rng.randrange(len(jobs))
    view = jobs[k]
    kind = rng.randrange(8)
    if kind == 0:
        del jobs[k]
    elif kind == 7:  # a second view of one job, beside it (as a faulty body might give)
        jobs.insert(k + rng.choice((0, 1)), replace(view))
    elif kind == 1:
        jobs.insert(k, _placed(rng, n))
    elif kind == 2:  # another resident of a group, or a newcomer on a group's GPUs
        others = [j for j in jobs if j.workers]
        if others:
            host = rng.choice(others)
            jobs.append(
                replace(
                    _placed(rng, n),
                    requested_gpus=host.workers if rng.random() < 0.8 else 1,
                    devices=host.devices,
                    workers=host.workers,
                    suspended=True,
                )
            )
    elif kind == 3 and view.workers:  # suspended or resumed in place, same devices
        object.__setattr__(view, "suspended", not view.suspended)
    elif kind == 4 and view.workers > 1:  # fewer workers in place, on the same devices
        object.__setattr__(view, "workers", view.workers - 1)
    elif kind == 5:  # a new view of the job, elsewhere or nowhere
        moved = _placed(rng, n)
        jobs[k] = replace(view, devices=moved.devices, workers=moved.workers)
    else:  # a new view of the job, the same otherwise
        jobs[k] = replace(view, suspended=bool(view.workers) and not view.suspended)


def _found(groups: list[Group]) -> list[tuple[tuple[Device, ...], list[str], bool]]:
    return sorted((g.devices, [r.id for r in g.residents], g.one_node) for g in groups)


def _on(n: int, size: int) -> tuple[Device, ...]:
    return tuple(Device(f"n{n:03d}", i) for i in range(size))
