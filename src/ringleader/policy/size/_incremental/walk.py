"""The walk that hands out GPUs along kept chains, as the greedy would.

The greedy (``ringleader.policy.size.growth``) takes, one at a time, the best
next step of any job. Over kept chains that is a walk in a fixed order,
which ``walk`` takes without a heap for most of its length: a step is
reached once every step before it in its chain is taken, so it comes
when the greedy's heap would pop its *lead*, the worst key along the chain
up to it (a later, better-scoring step waits for the worse one before it).
So the greedy takes the steps in the order of (lead, the job's place in
the order, the step's place in its chain), taking each that fits the GPUs
left, dropping a job for good at its first step that does not fit, and
stopping a chain at the first grow that would not win back its restart
(``ringleader.policy.size.payback``). Every level of lead whose steps all fit
the GPUs left is taken whole, in any order; only the steps from the first
level that does not fit onward need the heap, and they stop where the GPUs
run out. Where the last large walk's cut fell (``ringleader.policy.size._incremental.cut``),
the walk looks for its cut among the steps led near it, takes the jobs led
wholly below it without sorting their steps, and leaves those led above it
out of the heap unless the GPUs left reach them.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

from ringleader.policy.model.objective import Candidate
from ringleader.policy.model.plan import Note
from ringleader.policy.size._incremental.chain import Chain
from ringleader.policy.size._incremental.cut import Levels, Window, cut_level
from ringleader.policy.size._incremental.walk_notes import Later, LeadAt, Notes
from ringleader.policy.size.payback import may_refuse, pays, won_back
from ringleader.policy.size.steps import (
    Counts,
    StepOf,
    no_gain,
    not_won,
    scaled_entry,
)


def walk(
    jobs: list[Candidate],
    of: list[Chain],
    free: int,
    step: StepOf,
    per_epoch: bool,
    out: Counts,
    scales: list[float] | None = None,
    near: Window | None = None,
) -> Later:
    """Grow ``jobs`` (each from the start of its chain ``of[i]``) as the greedy would.

    Writes each job's size into ``out``, which has each job's chain's start size
    already (``growth.greedy``). Returns where each job's growth
    stopped (its chain's end, a grow that would not pay, or outbid for the
    GPUs left), worked out only if asked: most decisions' notes never are.
    ``scales``: each job's objectives are its chain's times this
    (``growth.greedy``'s ``scaled``), and its scores and leads are worked out
    from them as the greedy's heap works them out, whatever the scale (at 0,
    no step gains anything). ``near``: where the last large walk's cut fell
    (``cut.Window``), to find this one's among the steps led near it.
    """
    n = len(jobs)
    ends = [0] * n
    """How many of its chain's steps each job may take: up to a grow that does not pay."""
    refused: dict[int, Note] = {}
    """The note of each job's grow that does not pay (or, scaled, gains nothing), written
    now: it reads the job's progress, which the body moves on in place after the decision."""
    led: list[list[float]] = []
    """Each job's leads as walked: its chain's, or, scaled, worked out for this decision."""
    total = 0
    lasts: list[float] = [0.0] * n
    """Each job's last lead it may take (where it may take any): compared with the cut."""
    ids: list[str] = [""] * n
    """Each job's id, where it may take a step: read here, while the job is at hand."""
    lo, hi = near.bounds() if near is not None else (-math.inf, math.inf)
    whole: list[int] = []
    """Jobs whose every step it may take is led below ``lo``."""
    above: list[int] = []
    """Jobs whose first step is led above ``hi``."""
    near_jobs: list[int] = []
    """The other jobs that may take a step: those with a step led from ``lo`` to ``hi``."""
    levels = Levels(lo, hi)
    """The steps led from ``lo`` to ``hi``, gathered while each chain is at hand, not in a
    pass of its own over every chain."""
    for i in range(n):
        c, chain = jobs[i], of[i]
        if chain.runs is None:
            chain.lay_out(c, step, per_epoch)
        sizes = chain.sizes
        t = len(chain.adds)
        if not t:  # no step: the job is at its maximum
            led.append(chain.leads)
            continue
        now = c.job.workers
        refusing = sizes[-1] > now and may_refuse(c)
        if scales is not None:
            t = _scaled(c, chain, scales[i], refusing, per_epoch, i, refused, led)
        else:
            led.append(chain.leads)
            if refusing:
                t = _paying(c, chain, per_epoch, i, refused)
        ends[i] = t
        if not t:
            continue
        grows = sizes[t] - chain.start
        total += grows
        leads = led[i]
        last = leads[t - 1]
        lasts[i] = last
        ids[i] = c.job.id
        if last < lo:
            whole.append(i)
            levels.below += grows
        elif leads[0] > hi:
            above.append(i)
            levels.beyond += 1
        else:
            near_jobs.append(i)
            levels.gather(chain, leads, t, scales is None)
    if total <= free:
        # Everything fits: no step is dropped, and the order they are taken in is moot.
        for i in range(n):
            if ends[i]:  # (none taken: ``out`` has the chain's start already)
                out[ids[i]] = of[i].sizes[ends[i]]
        return Notes(jobs, of, ends, ends, [], [], 0, refused, per_epoch, scales, _Led(led))
    windowed = lo > -math.inf or hi < math.inf
    cut, left = levels.cut(free) if windowed else (math.nan, 0)
    if cut == cut:
        assert near is not None  # (a window is only ever ``near``'s)
        near.found(cut)
    else:
        if windowed:  # missed the window: every step, as without one
            levels = Levels(-math.inf, math.inf)
            near_jobs = [i for i in range(n) if ends[i]]
            whole, above = [], []
            for i in near_jobs:
                levels.gather(of[i], led[i], ends[i], scales is None)
        if near is not None:
            cut, left = near.learn(levels.leads, levels.gpus, free)
        else:
            cut, left = cut_level(levels.leads, levels.gpus, free)

    # Every step led by better than the cut is taken; the cut's own steps come in the
    # jobs' order, each taken while it fits; the rest wait in the heap.
    heap: list[tuple[float, int, int]] = []
    taken = [0] * n
    for i in whole:
        t = taken[i] = ends[i]
        out[ids[i]] = of[i].sizes[t]
    dropped: list[tuple[int, int]] = []
    """Jobs whose next step did not fit the GPUs left: (job index, GPUs left)."""
    waiting: list[int] = []
    """How many steps in the heap add each number of GPUs, by that number (``_wait``): a
    list, not a dictionary, which would box and hash two ints per step."""
    for i in near_jobs:
        t = ends[i]
        if lasts[i] < cut:
            # Leads only grow along a chain: every step is led by better than the cut.
            taken[i] = t
            out[ids[i]] = of[i].sizes[t]
            continue
        chain, leads = of[i], led[i]
        k = _first_at(leads, cut, t)
        while k < t and leads[k] == cut:
            add = chain.adds[k]
            if add > left:
                dropped.append((i, left))
                t = -1  # dropped: nothing more for it
                break
            left -= add
            k += 1
        if k < t:
            heap.append((leads[k], i, k))
            _wait(waiting, chain.adds[k])
        taken[i] = k
        if k:
            out[ids[i]] = chain.sizes[k]
    if left > 0:  # (with none left nothing is popped: the heap's order is moot)
        heapq.heapify(heap)  # keys are unique (by index): pops come in the greedy's order
    lead_at = _Led(led)
    left, rest = past_the_cut(
        jobs, of, lead_at, ends, taken, out, heap, above, waiting, dropped, left, hi
    )
    return Notes(jobs, of, ends, taken, dropped, rest, left, refused, per_epoch, scales, lead_at)


class _Led:
    """``LeadAt`` over each job's leads as a list."""

    __slots__ = ("led",)

    def __init__(self, led: list[list[float]]) -> None:
        self.led = led

    def __call__(self, i: int, k: int) -> float:
        return self.led[i][k]


def past_the_cut(
    jobs: Sequence[Candidate],
    of: Sequence[Chain],
    lead_at: LeadAt,
    ends: list[int],
    taken: list[int],
    out: Counts,
    heap: list[tuple[float, int, int]],
    above: list[int],
    waiting: list[int],
    dropped: list[tuple[int, int]],
    left: int,
    hi: float,
) -> tuple[int, list[int]]:
    """The walk's steps past its cut, from ``heap`` (keyed by lead, job index, step), taken
    one at a time while they fit the ``left`` GPUs, as the greedy's heap takes them.

    ``above``: the jobs whose first step is led above ``hi`` (the window's top), which
    join the heap once its next step is led above it too, if ever: most walks run out
    of GPUs first. Until then the fewest GPUs their first steps add stand for them in
    the test that some step left fits, worked out when first asked. ``waiting`` counts
    the steps in the heap by the GPUs they add (``_wait``). Writes each job's steps
    taken in ``taken`` and its size in ``out``, each job outbid in ``dropped``; returns
    the GPUs left and the jobs whose next step was never weighed.
    """
    fewest = -1
    while left > 0:
        if above and (not heap or heap[0][0] > hi):
            for i in above:
                heap.append((lead_at(i, 0), i, 0))
                _wait(waiting, of[i].adds[0])
            above = []
            heapq.heapify(heap)
        if not heap:
            break
        _, i, k = heap[0]
        chain = of[i]
        add = chain.adds[k]
        waiting[add] -= 1
        if add > left:
            if above and fewest < 0:
                fewest = min([of[i].adds[0] for i in above])
            if (not above or fewest > left) and not _any_fits(waiting, left):
                waiting[add] += 1
                break  # no step left fits: each is outbid with the GPUs left, as if dropped
            dropped.append((i, left))
            heapq.heappop(heap)
            continue
        left -= add
        k += 1
        taken[i] = k
        out[jobs[i].job.id] = chain.sizes[k]
        if k == ends[i]:
            heapq.heappop(heap)
        else:
            heapq.heapreplace(heap, (lead_at(i, k), i, k))
            _wait(waiting, chain.adds[k])
    return left, [e[1] for e in heap] + above


def _wait(waiting: list[int], add: int) -> None:
    """Count one more step of ``add`` GPUs in ``waiting``."""
    if add >= len(waiting):
        waiting.extend([0] * (add + 1 - len(waiting)))
    waiting[add] += 1


def _any_fits(waiting: list[int], left: int) -> bool:
    """Whether any step counted in ``waiting`` adds no more than ``left`` GPUs."""
    return any(waiting[add] for add in range(min(left + 1, len(waiting))))


def _first_at(leads: list[float], cut: float, hi: int) -> int:
    """``bisect.bisect_left(leads, cut, 0, hi)``: the first of a chain's first ``hi`` leads
    (ascending) not below ``cut``, written out for a chain of a few steps
    (docs/scale.md, "The compiled hot path")."""
    lo = 0
    while lo < hi:
        mid = (lo + hi) // 2
        if leads[mid] < cut:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _paying(c: Candidate, chain: Chain, per_epoch: bool, i: int, refused: dict[int, Note]) -> int:
    """How many of ``chain``'s steps ``c`` may take before a grow past its size that does
    not win back its restart, whose note goes in ``refused``."""
    sizes, now = chain.sizes, c.job.workers
    for k in range(len(chain.adds)):
        if sizes[k + 1] > now and not pays(c, sizes[k + 1]):
            w, add, before, after, _ = chain.steps[k]
            refused[i] = not_won(c, w, add, before, after, per_epoch)
            return k
    return len(chain.adds)


def _scaled(
    c: Candidate,
    chain: Chain,
    scale: float,
    refusing: bool,
    per_epoch: bool,
    i: int,
    refused: dict[int, Note],
    led: list[list[float]],
) -> int:
    """How many of ``chain``'s steps ``c`` may take with ``scale`` of its work left, its
    leads appended to ``led``: each step's objectives are the chain's times ``scale``,
    and its score is worked out from them as the heap's is (``scaled_entry``), to the
    bit. A step that so saves nothing (the product too small to tell) or does not pay
    ends the job's growth, as in the heap, with its note in ``refused``."""
    leads: list[float] = []
    lead = -math.inf
    sizes, now = chain.sizes, c.job.workers
    steps = chain.steps
    # ``pays`` for a job it may refuse, asked with what is at hand: the job's remaining
    # seconds now, once, and each step's after, which is ``remaining_seconds`` of the
    # step's size to the bit (``greedy``'s ``scaled``), rather than ``pays`` per step,
    # which would work both out again each time.
    now_s = c.remaining_seconds(now) if refusing else 0.0
    restart_s = c.job.restart_s
    # ``scaled_entry`` worked out from the chain's lists, its tuple built only for a note.
    adds, befores, afters = chain.adds, chain.befores, chain.afters
    measured = c.measured
    for k in range(len(steps)):
        before, after = scale * befores[k], scale * afters[k]
        score = (before - after) / adds[k]
        if not score > 0:
            w, add, before, after, _ = scaled_entry(steps[k], scale)
            refused[i] = no_gain(c, w, add, before, after, per_epoch)
            led.append(leads)
            return k
        if refusing and sizes[k + 1] > now and not won_back(now_s, after, restart_s):
            w, add, before, after, _ = scaled_entry(steps[k], scale)
            refused[i] = not_won(c, w, add, before, after, per_epoch)
            led.append(leads)
            return k
        if measured:
            lead = max(lead, -score)
        leads.append(lead)
    led.append(leads)
    return len(steps)
