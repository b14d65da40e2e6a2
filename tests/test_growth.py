"""The walk over kept chains gives what the plain heap gives: sizes and every note."""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Iterable

import pytest

from ringleader.policy.model.objective import Candidate
from ringleader.policy.model.plan import NO_GAIN, RESTART_NOT_WON, Note
from ringleader.policy.model.views import Device
from ringleader.policy.size._incremental.chain import Chain
from ringleader.policy.size._incremental.chains import BATCHED_FROM
from ringleader.policy.size._incremental.cut import SORTED_FROM, Window, _cut_ordered, _cut_sorted
from ringleader.policy.size._incremental.flat import Flat
from ringleader.policy.size._incremental.walk import _first_at, walk
from ringleader.policy.size.allocators import Doubling, OptimusGreedy
from ringleader.policy.size.growth import Chains, greedy
from ringleader.policy.size.payback import may_refuse, pays, saved_by
from ringleader.policy.size.steps import Growth, Step, StepOf
from ringleader.sim.profiles import RESNET110_K40
from ringleader.spine.views import progress_view
from tests.helpers import constant_epochs, latency_bound_model, resnet_job

MODELS = [
    (RESNET110_K40.speed_model, RESNET110_K40.epochs),
    (RESNET110_K40.speed_model, RESNET110_K40.epochs.scaled(3.0)),
    (latency_bound_model(), constant_epochs()),
]
"""Speed models and epochs: chains are kept per pair (their memoised curve)."""

BATCHED = [BATCHED_FROM, 1]
"""Jobs from which a walk over kept chains works in numpy: as in production, and always."""


def _jobs(rng: random.Random, n: int) -> tuple[list[Candidate], dict[str, int]]:
    """``n`` elastic candidates, some running (so the restart test bites), some unmeasured."""
    out: list[Candidate] = []
    counts: dict[str, int] = {}
    for i in range(n):
        speed, epochs = rng.choice(MODELS)
        top = rng.choice((1, 2, 4, 8, 16, 32))
        workers = rng.choice((0, 0, 1, 2, 4))
        workers = min(workers, top)
        job = resnet_job(
            f"j{i:03d}",
            at=float(i),
            remaining=rng.uniform(0.01, 1.0),
            max_gpus=top,
            requested_gpus=rng.choice((1, top)),
            speed=speed,
            epochs=epochs,
            workers=workers,
            devices=tuple(Device(f"n{i}", k) for k in range(workers)),
            restart_s=rng.choice((0.0, 30.0, 3000.0)),
            suspended=workers > 0 and rng.random() < 0.1,
        )
        out.append(Candidate(job, job.speed, measured=rng.random() < 0.8))
        if rng.random() < 0.9:
            counts[job.id] = rng.choice((1, 1, 2)) if top >= 2 else 1
    return out, counts


def _all(g: Growth) -> tuple[dict[str, int], dict[str, Note]]:
    notes: dict[str, Note] = dict(g.notes)
    if g.later is not None:
        notes.update(g.later())
    return g.counts, notes


def _frees(rng: random.Random, whole: Growth, counts: dict[str, int]) -> tuple[int, ...]:
    """GPUs free to try, given what ``whole`` grew with GPUs to spare: at the edge (all
    fits; one GPU short) and at random."""
    wanted = sum(whole.counts.values()) - sum(counts.values())
    return wanted, wanted - 1, rng.choice((0, 1, 3, 8, 40, 200))


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("batched_from", BATCHED, ids=["loop", "numpy"])
def test_kept_chains_give_what_the_heap_gives(seed: int, batched_from: int) -> None:
    rng = random.Random(seed)
    chains = Chains(limit=64, batched_from=batched_from)  # small: cleared along the way too
    step = Doubling._epoch_step
    shortcuts = 0
    for _ in range(60):
        jobs, counts = _jobs(rng, rng.randint(1, 80))
        for free in _frees(rng, greedy(jobs, counts, 10**6, step, per_epoch=True), counts):
            plain = greedy(jobs, counts, free, step, per_epoch=True)
            kept = greedy(jobs, counts, free, step, per_epoch=True, chains=chains)
            assert _all(kept) == _all(plain)
            assert sum(kept.counts.values()) - sum(counts.values()) <= max(free, 0)
            shortcuts += plain.later is None
    # Both ways were taken: some decisions fit whole (the shortcut), others did not.
    assert 0 < shortcuts < 180


@pytest.mark.parametrize("batched_from", BATCHED, ids=["loop", "numpy"])
def test_a_grow_that_does_not_pay_stops_the_chain_in_the_shortcut_too(batched_from: int) -> None:
    on = tuple(Device("n", k) for k in range(2))
    job = resnet_job("a", max_gpus=16, workers=2, devices=on, restart_s=1e9, remaining=0.5)
    c = Candidate(job, job.speed)
    chains = Chains(batched_from=batched_from)
    g = greedy([c], {"a": 1}, 100, Doubling._epoch_step, per_epoch=True, chains=chains)
    assert g.counts == {"a": 2}  # 1 → 2 is no grow past where it runs; 2 → 4 does not pay
    assert _all(g)[1]["a"][0] == "restart_not_won"


@pytest.mark.parametrize("batched_from", BATCHED, ids=["loop", "numpy"])
def test_a_refused_grow_is_noted_as_of_the_decision_though_progress_moves_on(
    batched_from: int,
) -> None:
    on = tuple(Device("n", k) for k in range(2))
    job = resnet_job("a", max_gpus=16, workers=2, devices=on, restart_s=1e9, remaining=0.5)
    c = Candidate(job, job.speed)
    saved = saved_by(c, 4)
    chains = Chains(batched_from=batched_from)
    g = greedy([c], {"a": 1}, 100, Doubling._epoch_step, per_epoch=True, chains=chains)
    progress_view(job, 0.25, 0.0, None)  # the body moves the view on before notes are read
    note = _all(g)[1]["a"]
    assert note[0] == "restart_not_won" and note[8] == saved != saved_by(c, 4)


def _made_up(rng: random.Random, jobs: list[Candidate]) -> dict[tuple[str, int], Step | None]:
    """Steps of uneven sizes with few distinct scores (so many ties, within a job and
    across jobs), some of infinite score, some of none (NaN: inf before and after)."""
    table: dict[tuple[str, int], Step | None] = {}
    for c in jobs:
        w = 1
        for _ in range(rng.randint(0, 5)):
            add = rng.choice((1, 1, 2, 3, 5))
            kind = rng.random()
            if kind < 0.05:
                table[c.job.id, w] = (add, math.inf, math.inf)
            elif kind < 0.1:
                table[c.job.id, w] = (add, math.inf, 10.0)
            else:
                table[c.job.id, w] = (add, 100.0, 100.0 - add * rng.choice((0.5, 1.0, 2.0)))
            w += add
    return table


def _looked_up(table: dict[tuple[str, int], Step | None]) -> StepOf:
    def step(c: Candidate, w: int) -> Step | None:
        return table.get((c.job.id, w))

    return step


def _walks_as_the_heap(
    jobs: list[Candidate], counts: dict[str, int], step: StepOf, frees: Iterable[int]
) -> None:
    """The walk over fresh chains gives the heap's sizes and every note, at each of ``frees``."""
    grown = [c for c in jobs if counts.get(c.job.id) and c.job.elastic and c.speed]
    for free in frees:
        sizes, notes = _all(greedy(jobs, counts, free, step, per_epoch=True))
        out = dict(counts)
        later = walk(grown, [Chain(1) for _ in grown], free, step, True, out)
        assert out == sizes
        assert later() == {c.job.id: notes[c.job.id] for c in grown}


@pytest.mark.parametrize("seed", range(20))
def test_the_walk_gives_what_the_heap_gives_on_made_up_steps(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(30):
        jobs, _ = _jobs(rng, rng.randint(1, 40))
        counts = {c.job.id: 1 for c in jobs if rng.random() < 0.9}
        table = _made_up(rng, jobs)
        want = sum(add for add, _, _ in filter(None, table.values()))
        frees = (-1, 0, 1, 2, 3, want - 1, want, rng.randint(0, want + 1))
        _walks_as_the_heap(jobs, counts, _looked_up(table), frees)


@pytest.mark.parametrize("seed", range(3))
def test_the_walk_gives_what_the_heap_gives_where_it_sorts_its_steps(seed: int) -> None:
    """Enough steps that the cut is found by sorting them (``walk.SORTED_FROM``)."""
    rng = random.Random(seed)
    jobs, _ = _jobs(rng, 700)
    table = _made_up(rng, jobs)
    steps = [s for s in table.values() if s is not None]
    assert len(steps) >= SORTED_FROM
    want = sum(add for add, _, _ in steps)
    frees = (0, 1, want // 3, want // 2, want - 1, rng.randint(0, want))
    _walks_as_the_heap(jobs, {c.job.id: 1 for c in jobs}, _looked_up(table), frees)


def _cut_summed(leads: list[float], gpus: list[int], free: int) -> tuple[float, int]:
    """The cut as the walk once found it, and as its docstring defines it: the steps'
    GPUs summed per lead, the levels taken in lead order while they fit."""
    levels: dict[float, int] = {}
    for lead, g in zip(leads, gpus, strict=True):
        levels[lead] = levels.get(lead, 0) + g
    left = free
    for lead in sorted(levels):
        if levels[lead] > left:
            return lead, left
        left -= levels[lead]
    return math.inf, left


@pytest.mark.parametrize("seed", range(10))
def test_the_cut_is_the_levels_summed_in_lead_order_either_way(seed: int) -> None:
    rng = random.Random(seed)
    pool = [-math.inf, -3.0, -2.5, -2.0, -1.0, -0.5, -1e-300]
    for n in (0, 1, 5, 300, 2000):
        leads = [rng.choice(pool) if rng.random() < 0.7 else -rng.random() for _ in range(n)]
        gpus = [rng.choice((1, 2, 4, 8)) for _ in range(n)]
        total = sum(gpus)
        for free in {0, 1, total // 2, total - 1, total, total + 5, rng.randint(0, total)}:
            want = _cut_summed(leads, gpus, free)
            assert _cut_sorted(leads, gpus, free) == want
            assert _cut_ordered(leads, gpus, free) == want


def test_a_step_of_no_score_at_all_is_no_gain() -> None:
    """An objective of inf at both sizes saves nothing measurable (its score is NaN)."""
    jobs = [
        resnet_job("j0", max_gpus=8, elastic=True),
        # Another model: a chain is kept per model, and these steps are made up per job.
        resnet_job("j1", at=1.0, max_gpus=8, elastic=True, speed=latency_bound_model()),
    ]
    cands = [Candidate(job, job.speed) for job in jobs]

    def step(c: Candidate, w: int) -> Step | None:
        if w >= 4:
            return None
        return (w, math.inf, math.inf) if c.job.id == "j0" else (w, 100.0, 50.0)

    for chains in (None, Chains()):
        g = greedy(cands, {"j0": 1, "j1": 1}, 3, step, per_epoch=True, chains=chains)
        sizes, notes = _all(g)
        assert sizes == {"j0": 1, "j1": 4}
        assert notes["j0"][0] == NO_GAIN


def test_a_job_measured_between_decisions_gets_its_measured_chain() -> None:
    """One ``Chains`` across decisions: a job first grown on a guess (not yet measured,
    up to its start size, ahead of the others) and then on its measurements."""
    chains = Chains()
    step = Doubling._epoch_step
    others = [resnet_job(f"o{i}", at=float(i), max_gpus=8, elastic=True) for i in range(3)]
    job = resnet_job("new", at=9.0, max_gpus=16, requested_gpus=4, elastic=True)
    counts = {j.id: 1 for j in [*others, job]}
    for measured in (False, True, False):
        jobs = [Candidate(j, j.speed) for j in others] + [Candidate(job, job.speed, measured)]
        for free in (0, 3, 7, 12, 40):
            plain = greedy(jobs, counts, free, step, per_epoch=True)
            kept = greedy(jobs, counts, free, step, per_epoch=True, chains=chains)
            assert _all(kept) == _all(plain)
        grown = greedy(jobs, counts, 40, step, per_epoch=True, chains=chains).counts["new"]
        assert grown == (16 if measured else 4)  # a guess grows only to its start size


@pytest.mark.parametrize("seed", range(3))
def test_where_payback_may_not_refuse_it_never_does(seed: int) -> None:
    rng = random.Random(seed)
    jobs, _ = _jobs(rng, 200)
    refusable = [c for c in jobs if may_refuse(c)]
    assert 0 < len(refusable) < len(jobs)
    for c in jobs:
        if not may_refuse(c):
            assert all(pays(c, size) for size in range(1, 65))
    assert any(not pays(c, size) for c in refusable for size in range(1, 65))


def _remaining_step(step: StepOf) -> StepOf:
    """``step`` (per unit of work) in remaining seconds, as the sizing stages weighed before
    their chains were kept: each objective times the job's remaining fraction."""

    def remaining(c: Candidate, w: int) -> Step | None:
        got = step(c, w)
        if got is None:
            return None
        add, _, _ = got
        return add, c.remaining_seconds(w), c.remaining_seconds(w + add)

    return remaining


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("step", [Doubling._step, OptimusGreedy._step], ids=["doubling", "optimus"])
@pytest.mark.parametrize("batched_from", BATCHED, ids=["loop", "numpy"])
def test_scaled_chains_give_what_the_scaled_heap_gives(
    seed: int, step: StepOf, batched_from: int
) -> None:
    rng = random.Random(seed)
    chains = Chains(limit=64, batched_from=batched_from)
    walked = refused = 0
    for _ in range(40):
        jobs, counts = _jobs(rng, rng.randint(1, 60))
        for free in _frees(rng, greedy(jobs, counts, 10**6, step, scaled=True), counts):
            plain = greedy(jobs, counts, free, step, scaled=True)
            kept = greedy(jobs, counts, free, step, chains=chains, scaled=True)
            assert _all(kept) == _all(plain)
            walked += kept.later is not None
            refused += sum(n[0] == RESTART_NOT_WON for n in _all(kept)[1].values())
            # Remaining seconds weighed step by step, as before: the same, to the bit.
            assert _all(greedy(jobs, counts, free, _remaining_step(step))) == _all(plain)
    assert walked > 0
    # The walk's own restart test (``payback.won_back`` on the step's remaining seconds)
    # refused grows, and refused the ones ``pays`` refuses in the heap.
    assert refused > 0


@pytest.mark.parametrize("seed", range(4))
def test_the_walks_search_of_a_chains_leads_is_bisect_left(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(300):
        leads = sorted(rng.choice((-3.0, -1.0, -0.5, 0.0, 2.0)) for _ in range(rng.randint(0, 9)))
        cut = rng.choice((-4.0, -3.0, -1.0, -0.75, 0.0, 2.0, 5.0))
        hi = rng.randint(0, len(leads))
        assert _first_at(leads, cut, hi) == bisect.bisect_left(leads, cut, 0, hi)


def test_a_job_with_no_work_left_gains_nothing_from_a_scaled_step() -> None:
    """At a scale of 0 the kept chain's steps save nothing, as the job's remaining seconds
    say when weighed step by step."""
    jobs = [
        resnet_job("done", max_gpus=8, elastic=True, remaining=0.0),
        resnet_job("busy", at=1.0, max_gpus=8, elastic=True, remaining=0.5),
    ]
    cands = [Candidate(job, job.speed) for job in jobs]
    counts = {"done": 1, "busy": 1}
    g = greedy(cands, counts, 20, Doubling._step, chains=Chains(), scaled=True)
    sizes, notes = _all(g)
    batched = greedy(cands, counts, 20, Doubling._step, chains=Chains(batched_from=1), scaled=True)
    assert _all(batched) == (sizes, notes)
    assert sizes == {"done": 1, "busy": 8}
    assert notes["done"][0] == NO_GAIN
    assert _all(greedy(cands, counts, 20, _remaining_step(Doubling._step))) == (sizes, notes)


def _near_the_last_cut(seed: int) -> Window:
    """80 walks with a window over one seed's jobs, each checked against the heap."""
    rng = random.Random(seed)
    jobs, _ = _jobs(rng, 120)
    counts = {c.job.id: 1 for c in jobs}
    table = _made_up(rng, jobs)
    step = _looked_up(table)
    grown = [c for c in jobs if c.job.elastic and c.speed]
    chains = [Chain(1) for _ in grown]
    want = sum(add for add, _, _ in filter(None, table.values()))
    window = Window(from_steps=8, reach=rng.choice((0.02, 0.1)))
    free = want // 2
    for d in range(80):
        free = rng.randint(0, want) if d % 10 == 9 else max(free + rng.randint(-3, 3), 0)
        sizes, notes = _all(greedy(jobs, counts, free, step, per_epoch=True))
        out = dict(counts)
        later = walk(grown, chains, free, step, True, out, near=window)
        assert out == sizes
        assert later() == {c.job.id: notes[c.job.id] for c in grown}
    return window


def test_a_walk_that_looks_near_the_last_cut_gives_what_the_heap_gives() -> None:
    """Decision after decision with the GPUs free moving a little and now and then a lot,
    the walk with a window (found within it, or missed and sorted whole) gives the
    heap's sizes and every note."""
    windows = [_near_the_last_cut(seed) for seed in range(24)]
    # Both ways were taken, many times: found within the window, and sorted whole after
    # the first walk of a seed (made-up steps have few leads: some windows hold them all).
    assert sum(w.found_within for w in windows) > 100
    assert sum(w.sorted_all - 1 for w in windows) > 24


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("batched_from", BATCHED, ids=["loop", "numpy"])
def test_a_scaled_walk_that_looks_near_the_last_cut_gives_what_the_heap_gives(
    seed: int, batched_from: int
) -> None:
    """As above, with every job's leads moving between decisions as its progress does."""
    rng = random.Random(seed)
    jobs, counts = _jobs(rng, 150)
    step = Doubling._step
    chains = Chains(batched_from=batched_from)
    window = chains.window = Window(from_steps=8, reach=0.1)
    want = sum(greedy(jobs, counts, 10**6, step, scaled=True).counts.values())
    want -= sum(counts.values())
    free = want // 2
    for d in range(40):
        for c in jobs:
            job = c.job
            progress_view(job, job.remaining_fraction * rng.uniform(0.97, 1.0), 0.0, None)
        free = rng.randint(0, want) if d % 10 == 9 else max(free + rng.randint(-2, 2), 0)
        plain = greedy(jobs, counts, free, step, scaled=True)
        kept = greedy(jobs, counts, free, step, chains=chains, scaled=True)
        assert _all(kept) == _all(plain)
    assert window.found_within > 0 and window.sorted_all > 1


def test_a_window_reaches_down_to_the_first_finite_lead_not_to_unmeasured_jobs() -> None:
    """Jobs not yet measured lead at minus infinity; a window around a cut among measured
    jobs sums their steps below it instead of sorting them all."""
    rng = random.Random(5)
    leads = [-math.inf] * 600 + [-rng.random() for _ in range(600)]
    gpus = [rng.choice((1, 2, 4)) for _ in leads]
    free = sum(gpus[:600]) + sum(gpus[600:]) // 2
    window = Window(from_steps=100, reach=0.25)
    assert window.learn(leads, gpus, free) == _cut_summed(leads, gpus, free)
    lo, hi = window.bounds()
    assert -1.0 <= lo < window.at < hi <= 0.0
    # Where the cut is among the unmeasured, no window is kept.
    assert window.learn(leads, gpus, 10)[0] == -math.inf
    assert window.bounds() == (-math.inf, math.inf)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("scaled", [True, False], ids=["scaled", "per_epoch"])
def test_a_numpy_walk_whose_arrays_fill_up_files_its_chains_again(seed: int, scaled: bool) -> None:
    """Arrays of a few steps start again many times, mid-walk too; every walk still gives
    what the heap gives."""
    rng = random.Random(seed)
    chains = Chains(limit=64, batched_from=1)
    chains.flat = Flat(limit=12)
    step = Doubling._step if scaled else Doubling._epoch_step
    how = {"scaled": True} if scaled else {"per_epoch": True}
    for _ in range(30):
        jobs, counts = _jobs(rng, rng.randint(1, 40))
        for free in _frees(rng, greedy(jobs, counts, 10**6, step, **how), counts):
            plain = greedy(jobs, counts, free, step, **how)
            kept = greedy(jobs, counts, free, step, chains=chains, **how)
            assert _all(kept) == _all(plain)
    assert chains.flat.generation > 10
    assert chains.flat.used > chains.flat.limit  # a walk of more steps than the arrays hold


@pytest.mark.parametrize("scaled", [True, False], ids=["scaled", "per_epoch"])
def test_a_greedy_given_thousands_of_jobs_walks_in_numpy_as_the_heap_does(scaled: bool) -> None:
    """At ``BATCHED_FROM`` jobs the walk works in numpy (its arrays fill), and gives what
    the heap gives, where GPUs run out and where all fit."""
    rng = random.Random(7)
    jobs, counts = _jobs(rng, BATCHED_FROM)
    step = Doubling._step if scaled else Doubling._epoch_step
    how = {"scaled": True} if scaled else {"per_epoch": True}
    chains = Chains()
    for free in _frees(rng, greedy(jobs, counts, 10**6, step, **how), counts):
        plain = greedy(jobs, counts, free, step, **how)
        kept = greedy(jobs, counts, free, step, chains=chains, **how)
        assert _all(kept) == _all(plain)
    assert chains.flat.used > 0
