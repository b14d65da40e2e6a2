"""A large walk over kept chains worked out in numpy: every job's steps at once.

The walk (``ringleader.policy.size._incremental.walk``) hands out GPUs along kept chains as
the greedy would. Scaled (``growth.greedy``'s ``scaled``), a job's steps are
its chain's times the work it has left, so their scores and leads are worked
out again at every decision, with each job classed against the window around
the last cut (docs/scale.md, "The walk in numpy for thousands of jobs"). Here
the same numbers come from array operations over the chains' steps laid end to
end (``flat.Flat``): IEEE products, differences and quotients, the same to the
bit as the loop's, and maxima taken along each chain; per epoch, the chain's
own leads, read from the arrays. Only the jobs that need a look of their own
are walked in Python: those a step stops short of their chain's end (for its
note), those with a step at the cut's own lead (taken in the jobs' order while
they fit), and, where GPUs are left past the cut and some step fits them, the
greedy's heap over the rest (``walk.past_the_cut``).
"""

from __future__ import annotations

import heapq
import math

import numpy as np
import numpy.typing as npt

from ringleader.policy.model.objective import Candidate
from ringleader.policy.model.plan import Note
from ringleader.policy.size._incremental.chain import Chain
from ringleader.policy.size._incremental.chains import Chains
from ringleader.policy.size._incremental.cut import Levels
from ringleader.policy.size._incremental.flat import Flat
from ringleader.policy.size._incremental.walk import past_the_cut
from ringleader.policy.size._incremental.walk_notes import Later, Notes
from ringleader.policy.size.payback import MARGIN, may_refuse
from ringleader.policy.size.steps import Counts, StepOf, no_gain, not_won, scaled_entry

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]


class Rows:
    """The jobs a batched walk walks, each gathered as ``growth.greedy`` meets it (its
    objects are at hand then, where a pass of its own would fetch them again), one row
    per job whose chain has a step."""

    __slots__ = (
        "ats",
        "flat",
        "generation",
        "ids",
        "lens",
        "measured",
        "now_s",
        "nows",
        "per_epoch",
        "refusing",
        "restarts",
        "rows",
        "scaled",
        "shares",
        "step",
    )

    def __init__(self, flat: Flat, step: StepOf, per_epoch: bool, scaled: bool) -> None:
        self.flat = flat
        self.step = step
        self.per_epoch = per_epoch
        self.scaled = scaled
        self.generation = flat.generation
        self.lens: list[int] = []
        """How many steps each job of the walk has (0: none, and no row): the rows' jobs
        are found from it in numpy, where a list of their indices would box one per row."""
        self.rows = 0
        """How many rows so far."""
        self.ids: list[str] = []
        """Each row's job's id (its size is written by it)."""
        self.ats: list[object] = []
        """Where each row's chain's steps are in ``flat`` (``Chain.at``, kept boxed)."""
        self.measured: list[bool] = []
        """Whether each row's job is measured: its leads are worked out from it and the
        job's share of work left (the walk's ``scales``), where the walk is scaled."""
        self.refusing: list[int] = []
        """The rows whose job ``pays`` may refuse a grow past its size, with what it weighs:
        its share of work left, its size, its remaining seconds at that size, and its
        restart."""
        self.shares: list[float] = []
        self.nows: list[int] = []
        self.now_s: list[float] = []
        self.restarts: list[float] = []

    def add(self, i: int, c: Candidate, chain: Chain, scale: float) -> None:
        """Job ``i`` of the walk, ``c``, along ``chain``, with ``scale`` of its work left
        (its remaining fraction): the walk's jobs are added in order, each once."""
        if chain.runs is None:
            chain.lay_out(c, self.step, self.per_epoch)
        t = chain.count
        self.lens.append(t)
        if not t:
            return
        job = c.job
        now = job.workers
        if chain.top > now and may_refuse(c):
            self.refusing.append(self.rows)
            self.shares.append(scale)
            self.nows.append(now)
            self.now_s.append(c.remaining_seconds(now))
            self.restarts.append(job.restart_s)
        self.rows += 1
        self.ids.append(job.id)
        self.ats.append(self.flat.at(chain, None if self.scaled else c))
        if self.scaled:
            self.measured.append(c.measured)


def walk(
    jobs: list[Candidate],
    of: list[Chain],
    free: int,
    per_epoch: bool,
    out: Counts,
    scales: list[float] | None,
    chains: Chains,
    gathered: Rows,
) -> Later:
    """``walk.walk`` of ``jobs`` along ``of``, scaled by ``scales`` (if given), looking
    for its cut near ``chains.window``: the same sizes in ``out`` and the same notes.
    ``gathered``: the jobs with a step, as ``growth.greedy`` met them."""
    n = len(jobs)
    flat = chains.flat
    ids, ats = gathered.ids, gathered.ats
    refusing = gathered.refusing
    every: Ints = np.array(gathered.lens, dtype=np.int64)
    row_jobs: Ints = np.flatnonzero(every)
    """Each row's job, by its index in the walk."""
    if flat.generation != gathered.generation:
        # The arrays filled up and started again mid-walk, over chains filed before: file
        # this walk's own again, together (more than they hold, if need be).
        flat.start_again()
        rows: list[int] = row_jobs.tolist()
        ats = [flat.file(of[i], None if gathered.scaled else jobs[i]) for i in rows]
    refused: dict[int, Note] = {}
    m = len(row_jobs)
    if not m:
        return Notes(jobs, of, [0] * n, [0] * n, [], [], 0, refused, per_epoch, scales, _no_lead)

    length: Ints = every[row_jobs]
    first: Ints = np.zeros(m, dtype=np.int64)
    np.cumsum(length[:-1], out=first[1:])
    row_of: Ints = np.repeat(np.arange(m, dtype=np.int64), length)
    k_of: Ints = np.arange(len(row_of), dtype=np.int64) - first[row_of]
    where_at: Ints = np.array(ats, dtype=np.int64)
    where: Ints = where_at[row_of] + k_of
    adds: Ints = flat.adds[where]
    with np.errstate(all="ignore"):  # inf and NaN are the loop's too: they stop a chain
        if scales is not None:
            share: Floats = np.array(scales, dtype=np.float64)[row_jobs][row_of]
            measured = np.array(gathered.measured, dtype=np.bool_)[row_of]
            after: Floats = share * flat.afters[where]
            score: Floats = (share * flat.befores[where] - after) / adds
            stops = ~(score > 0)
            lead = _leads(score, measured, first, length)
        else:  # the chain's own leads, and no step but a refused grow stops it
            stops = np.zeros(len(where), dtype=np.bool_)
            lead = flat.leads[where]
        if refusing:
            ref = np.array(refusing, dtype=np.int64)
            may: npt.NDArray[np.bool_] = np.zeros(m, dtype=np.bool_)
            may[ref] = True
            s = np.flatnonzero(may[row_of])  # the steps of those rows
            row_now: Ints = np.zeros(m, dtype=np.int64)
            row_now[ref] = gathered.nows
            row_now_s: Floats = np.zeros(m, dtype=np.float64)
            row_now_s[ref] = gathered.now_s
            row_restart: Floats = np.zeros(m, dtype=np.float64)
            row_restart[ref] = gathered.restarts
            row_share: Floats = np.zeros(m, dtype=np.float64)
            row_share[ref] = gathered.shares
            sr = row_of[s]
            # ``payback.won_back``: the job's remaining seconds now less those after the
            # step (``Candidate.remaining_seconds``: its share of work left times the
            # whole job's seconds at the size after the step, ``Flat.wholes``).
            then_s = row_share[sr] * flat.wholes[where[s]]
            won = row_now_s[sr] - then_s >= MARGIN * row_restart[sr]
            stops[s] |= (flat.sizes[where[s]] > row_now[sr]) & ~won
    # How many steps each job may take: up to its first that gains nothing or does not pay.
    t_row: Ints = np.minimum.reduceat(np.where(stops, k_of, length[row_of]), first)
    valid = k_of < t_row[row_of]
    leads: Floats = lead[valid]
    gpus: Ints = adds[valid]
    t_list: list[int] = t_row.tolist()
    for r in np.flatnonzero(t_row < length).tolist():
        i = int(row_jobs[r])
        entry = of[i].steps[t_list[r]]
        if scales is not None:
            entry = scaled_entry(entry, scales[i])
        w, add, before, after_s, gain = entry
        c = jobs[i]
        if gain > 0:
            refused[i] = not_won(c, w, add, before, after_s, per_epoch)
        else:
            refused[i] = no_gain(c, w, add, before, after_s, per_epoch)
    ends = _by_job(t_row, row_jobs, n)
    lead_at = _FlatLeads(lead, first, row_jobs, n)
    if int(gpus.sum()) <= free:
        # Everything fits: no step is dropped, and the order they are taken in is moot.
        taken = _take(t_row, row_jobs, n, where_at, flat.sizes, ids, out)
        return Notes(jobs, of, ends, taken, [], [], 0, refused, per_epoch, scales, lead_at)

    near = chains.window
    lo, hi = near.bounds()
    cut, left = math.nan, 0
    if lo > -math.inf or hi < math.inf:
        levels = Levels(lo, hi)
        levels.gather_arrays(leads, gpus)
        cut, left = levels.cut(free)
    found = cut == cut
    if found:
        near.found(cut)
    else:
        cut, left = near.learn(leads.tolist(), gpus.tolist(), free)

    # Every step led by better than the cut is taken (leads only grow along a chain: a
    # prefix); the cut's own steps come in the jobs' order, each taken while it fits.
    with np.errstate(all="ignore"):
        kept: Ints = np.add.reduceat((valid & (lead < cut)).astype(np.int64), first)
        at_cut = np.flatnonzero(valid & (lead == cut))
    dropped: list[tuple[int, int]] = []
    open_rows = kept < t_row
    """The rows with a step left that may yet be taken."""
    if len(at_cut):
        cut_rows: list[int] = row_of[at_cut].tolist()
        cut_adds: list[int] = adds[at_cut].tolist()
        more: dict[int, int] = {}
        out_of_it: set[int] = set()
        """Rows dropped at the cut: nothing more for them."""
        for p in range(len(cut_rows)):
            r = cut_rows[p]
            if r in out_of_it:
                continue
            add = cut_adds[p]
            if add > left:
                dropped.append((int(row_jobs[r]), left))
                out_of_it.add(r)
                continue
            left -= add
            more[r] = more.get(r, 0) + 1
        if more:
            kept[np.array(list(more), dtype=np.int64)] += np.array(list(more.values()))
        open_rows = kept < t_row
        if out_of_it:
            open_rows[np.array(list(out_of_it), dtype=np.int64)] = False
    taken = _take(kept, row_jobs, n, where_at, flat.sizes, ids, out)

    # The rest wait, as in the greedy's heap: the jobs whose first step is led above the
    # window apart (``walk.past_the_cut``), where the cut was found within it.
    if found:
        first_above = lead[first] > hi
        waits = np.flatnonzero(open_rows & ~first_above)
        above: list[int] = row_jobs[open_rows & first_above].tolist()
    else:
        waits, above = np.flatnonzero(open_rows), []
    wait_jobs: list[int] = row_jobs[waits].tolist()
    rest = wait_jobs + above
    if left > 0 and rest:
        at_next = first[waits] + kept[waits]
        nexts: list[int] = adds[at_next].tolist()
        fewest = min(nexts) if nexts else left + 1
        if above:
            fewest = min(fewest, min([of[i].adds[0] for i in above]))
        if fewest <= left:  # else no step left fits: each is outbid with the GPUs left
            heap = list(zip(lead[at_next].tolist(), wait_jobs, kept[waits].tolist(), strict=True))
            waiting = [0] * (max(nexts, default=0) + 1)
            for add in nexts:
                waiting[add] += 1
            heapq.heapify(heap)
            left, rest = past_the_cut(
                jobs, of, lead_at, ends, taken, out, heap, above, waiting, dropped, left, hi
            )
    return Notes(jobs, of, ends, taken, dropped, rest, left, refused, per_epoch, scales, lead_at)


def _leads(score: Floats, measured: npt.NDArray[np.bool_], first: Ints, length: Ints) -> Floats:
    """Each step's lead: the worst key (``-score``, or minus infinity for a job not yet
    measured) along its chain up to it, as ``walk._scaled`` keeps it step by step (past
    a job's last step it may take, whatever it comes to is never read)."""
    lead: Floats = np.where(measured, -score, -math.inf)
    at = first
    more = length
    for k in range(1, int(length.max())):
        longer = more > k
        at, more = at[longer], more[longer]
        here = at + k
        lead[here] = np.maximum(lead[here - 1], lead[here])
    return lead


def _take(
    steps: Ints,
    row_jobs: Ints,
    n: int,
    where_at: Ints,
    sizes: Ints,
    ids: list[str],
    out: Counts,
) -> list[int]:
    """Each row's job takes its first ``steps[row]`` steps, where it takes any: sized in
    ``out`` at the size after its last (``Flat.sizes``, from where its chain's steps
    start, ``where_at[row]``); and the steps each of the walk's ``n`` jobs took. Every
    number read in Python is a small one (a size, a step count), which Python keeps
    made: no allocation per row."""
    sized: list[int] = np.where(steps > 0, sizes[where_at + steps - 1], 0).tolist()
    for r in range(len(sized)):
        size = sized[r]
        if size:
            out[ids[r]] = size
    return _by_job(steps, row_jobs, n)


def _by_job(per_row: Ints, row_jobs: Ints, n: int) -> list[int]:
    """A count per row as a list by job: 0 for the jobs with no row."""
    by_job: Ints = np.zeros(n, dtype=np.int64)
    by_job[row_jobs] = per_row
    return by_job.tolist()  # type: ignore[no-any-return]


def _no_lead(i: int, k: int) -> float:
    raise AssertionError("no job walked has a step")


class _FlatLeads:
    """``walk.LeadAt`` over the leads worked out for every row: the row of a job found
    in an array by job made when first asked (only notes and the heap ask), not in a
    dictionary of boxed indices."""

    __slots__ = ("first", "jobs", "lead", "row", "rows")

    def __init__(self, lead: Floats, first: Ints, rows: Ints, jobs: int) -> None:
        self.lead = lead
        self.first = first
        self.rows = rows
        self.jobs = jobs
        self.row: Ints | None = None

    def __call__(self, i: int, k: int) -> float:
        row = self.row
        if row is None:
            row = self.row = np.zeros(self.jobs, dtype=np.int64)
            row[self.rows] = np.arange(len(self.rows), dtype=np.int64)
        return float(self.lead[int(self.first[int(row[i])]) + k])
