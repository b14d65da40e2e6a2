"""A real run's GPUs per job over time, with its resizes, suspends and finishes marked.

The demo's one picture of what the scheduler did. One line per job (the old
"workers over time" panel) makes the reader add up the lines to see how full
the cluster was; a stacked area shows each job's share and the total against
the cluster's capacity at a glance, and the lanes beneath say when each job
waited, ran or was suspended and where it was resized or finished.

Everything here is computed from the job events the API returns
(``GET /jobs/ID``: ``{"t", "kind", ...}``), with no HTTP inside, so a test can
feed hand-made events and check the numbers the picture is drawn from
(:func:`gpu_series`, :func:`timeline_marks`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

# A generation's processes are gone after these.
_ENDS = frozenset({"stopped", "succeeded", "failed", "cancelled", "restarting"})
_FINAL = frozenset({"succeeded", "failed", "cancelled"})

# Event kind drawn -> (marker, face colour, legend label). Shape and colour both
# differ, so neither alone has to carry the meaning.
MARKS: dict[str, tuple[str, str, str]] = {
    "resize": ("D", "#ffd400", "resize"),
    "migration": (">", "#00c2c7", "migration"),
    "preempt": ("X", "#ff7f50", "preemption"),
    "suspend": ("v", "#ffffff", "suspend"),
    "resume": ("^", "#7fff7f", "resume"),
    "finish": ("o", "#000000", "finished"),
    "failed": ("X", "#d62728", "failed / cancelled"),
}

Job = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class GpuSeries:
    """GPUs running each job's workers, a step function of time.

    ``held[job_id][i]`` holds from ``times[i]`` until ``times[i + 1]`` (and
    after the last time). Times are seconds since the first submission.
    """

    times: list[float]
    held: dict[str, list[int]]

    def at(self, job_id: str, t: float) -> int:
        """GPUs ``job_id`` runs on at ``t`` seconds (the step's value from its left edge)."""
        value = 0
        for when, gpus in zip(self.times, self.held[job_id], strict=True):
            if when > t:
                break
            value = gpus
        return value

    def total(self, t: float) -> int:
        return sum(self.at(job_id, t) for job_id in self.held)


@dataclass(frozen=True, slots=True)
class Mark:
    """One event worth showing: ``kind`` is a key of :data:`MARKS`."""

    t: float
    job_id: str
    kind: str
    note: str = ""
    """For a resize, its worker counts: ``"1→2"``."""


@dataclass(frozen=True, slots=True)
class Span:
    """A stretch of a job's life: ``state`` is waiting, running or suspended."""

    start: float
    end: float
    state: str


def _events(job: Job) -> list[Mapping[str, Any]]:
    return sorted(job.get("events") or [], key=lambda e: float(e["t"]))


def start_time(jobs: Sequence[Job]) -> float:
    """The first submission (the time axis's zero), else the first event of any kind."""
    times = [float(e["t"]) for j in jobs for e in _events(j) if e["kind"] == "submitted"]
    if not times:
        times = [float(e["t"]) for j in jobs for e in _events(j)]
    return min(times, default=0.0)


def _job_steps(job: Job, t0: float) -> list[tuple[float, int]]:
    """(time, GPUs running its workers from then on), one pair per event that changes it.

    A suspended job keeps its processes but not the devices' time: another
    job's workers run on them, so it counts 0 until it is resumed, and the
    stack never counts a device twice.
    """
    steps: list[tuple[float, int]] = []
    workers, suspended = 0, False
    for e in _events(job):
        kind = str(e["kind"])
        if kind == "launched":
            workers, suspended = int(e.get("workers", 0)), False
        elif kind == "suspend_requested":
            suspended = True
        elif kind == "resume_requested":
            suspended = False
        elif kind in _ENDS:
            workers, suspended = 0, False
        else:
            continue
        steps.append((float(e["t"]) - t0, 0 if suspended else workers))
    return steps


def gpu_series(jobs: Sequence[Job]) -> GpuSeries:
    """Every job's GPUs on one shared time grid: each time at which any job's count changes."""
    t0 = start_time(jobs)
    per_job = {str(j["id"]): _job_steps(j, t0) for j in jobs}
    times = sorted({0.0} | {t for steps in per_job.values() for t, _ in steps})
    held: dict[str, list[int]] = {}
    for job_id, steps in per_job.items():
        values, value, i = [], 0, 0
        for t in times:
            while i < len(steps) and steps[i][0] <= t:
                value = steps[i][1]
                i += 1
            values.append(value)
        held[job_id] = values
    return GpuSeries(times, held)


def timeline_marks(jobs: Sequence[Job]) -> list[Mark]:
    """Resizes, migrations, preemptions, suspends, resumes and finishes, in time order.

    A resize or migration is marked where the job comes back at its new size
    or place (its ``launched`` event, whose ``counted`` says which it was).
    """
    t0 = start_time(jobs)
    marks: list[Mark] = []
    for job in jobs:
        job_id, before = str(job["id"]), 0
        for e in _events(job):
            kind, t, note = str(e["kind"]), float(e["t"]) - t0, ""
            drawn: str | None = None
            if kind == "launched":
                workers = int(e.get("workers", 0))
                counted = e.get("counted")
                if counted is None and before and workers != before:
                    counted = "resize"  # an older server's event: no ``counted``
                if counted in ("resize", "migration", "resume"):
                    drawn = str(counted)
                if counted == "resize":
                    note = f"{before}→{workers}"
                before = workers
            elif kind == "stop_requested" and e.get("reason") in ("preempt", "suspend"):
                drawn = str(e["reason"])
            elif kind == "suspend_requested":
                drawn = "suspend"
            elif kind == "resume_requested":
                drawn = "resume"
            elif kind == "succeeded":
                drawn = "finish"
            elif kind in ("failed", "cancelled"):
                drawn = "failed"
            if drawn is not None:
                marks.append(Mark(t, job_id, drawn, note))
    return sorted(marks, key=lambda m: (m.t, m.job_id))


def job_spans(job: Job, t0: float) -> list[Span]:
    """When ``job`` waited (submitted or stopped, not yet relaunched), ran, or was suspended."""
    spans: list[Span] = []
    state, since = "", 0.0
    for e in _events(job):
        kind, t = str(e["kind"]), float(e["t"]) - t0
        new = {
            "submitted": "waiting",
            "launched": "running",
            "suspend_requested": "suspended",
            "resume_requested": "running",
            "stopped": "waiting",
            "restarting": "waiting",
        }.get(kind, "" if kind in _FINAL else None)
        if new is None or new == state:
            continue
        if state and t > since:
            spans.append(Span(since, t, state))
        state, since = new, t
    return spans


def _label(job: Job) -> str:
    user = job.get("user")
    return f"{job['name']} ({user})" if user else str(job["name"])


def makespan(jobs: Sequence[Job]) -> float | None:
    """Seconds from the first submission to the last job's end, if every job has ended."""
    t0 = start_time(jobs)
    ends = [
        max((float(e["t"]) for e in _events(j) if e["kind"] in _FINAL), default=None) for j in jobs
    ]
    if not ends or any(e is None for e in ends):
        return None
    return max(e for e in ends if e is not None) - t0


def _lanes(low: Any, jobs: Sequence[Job], colour: Mapping[str, Any], t0: float) -> set[str]:
    """One lane per job, first submitted on top: waiting thin and grey, running in its
    colour, suspended hatched. Returns the states drawn."""
    drawn: set[str] = set()
    for y, job in zip(range(len(jobs) - 1, -1, -1), jobs, strict=True):
        c = colour[str(job["id"])]
        for span in job_spans(job, t0):
            style: dict[str, Any] = {
                "waiting": {"color": "#cccccc"},
                "running": {"color": c, "alpha": 0.85},
                "suspended": {"facecolor": "white", "edgecolor": c, "hatch": "///"},
            }[span.state]
            half = 0.08 if span.state == "waiting" else 0.3
            low.broken_barh([(span.start, span.end - span.start)], (y - half, 2 * half), **style)
            drawn.add(span.state)
    return drawn


def draw_gpu_timeline(jobs: Sequence[Job], capacity: int, *, title: str | None = None) -> Figure:
    """The figure: GPUs per job stacked over time above one lane of states and events per job."""
    ids = [str(j["id"]) for j in jobs]
    colour = {job_id: plt.get_cmap("tab10")(i % 10) for i, job_id in enumerate(ids)}
    series = gpu_series(jobs)
    end = max([*series.times, 1.0])
    end += max(end * 0.02, 0.5)
    lanes = max(len(jobs), 1)
    fig, (top, low) = plt.subplots(
        2,
        1,
        sharex=True,
        figsize=(11, 4.4 + 0.32 * lanes),
        height_ratios=[3.2, 0.32 * lanes + 0.3],
        layout="constrained",
    )
    marks = timeline_marks(jobs)
    _draw_gpus(top, jobs, series, colour, capacity, end)
    resizes = sum(1 for m in marks if m.kind == "resize")
    span = makespan(jobs)
    plural = "" if resizes == 1 else "s"
    top.set_title(
        title
        or f"GPUs per job over time: {len(jobs)} jobs on {capacity} GPUs, {resizes} resize{plural}"
        + ("" if span is None else f", makespan {span:.1f} s")
    )
    _draw_lanes(low, jobs, colour, marks, start_time(jobs), end)
    return fig


def _draw_gpus(
    top: Any,
    jobs: Sequence[Job],
    series: GpuSeries,
    colour: Mapping[str, Any],
    capacity: int,
    end: float,
) -> None:
    """The upper plot: each job's GPUs stacked over time, under the cluster's capacity."""
    ids = [str(j["id"]) for j in jobs]
    if jobs:
        # One more point at the right edge, so the last step is drawn.
        top.stackplot(
            [*series.times, end],
            [[*series.held[i], series.held[i][-1]] for i in ids],
            step="post",
            colors=[colour[i] for i in ids],
            labels=[_label(j) for j in jobs],
            alpha=0.85,
            edgecolor="white",
            linewidth=0.6,
        )
    top.axhline(capacity, color="black", linestyle="--", linewidth=1.2, label="cluster GPUs")
    top.set_ylim(0, capacity + max(0.6, capacity * 0.12))
    top.set_yticks(range(0, capacity + 1, max(1, capacity // 8)))
    top.set_ylabel("GPUs running each job")
    top.grid(alpha=0.3)
    top.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", title="job (user)")


def _draw_lanes(
    low: Any,
    jobs: Sequence[Job],
    colour: Mapping[str, Any],
    marks: Sequence[Mark],
    t0: float,
    end: float,
) -> None:
    """The lower plot: one lane per job of its states, its events marked and noted."""
    ids = [str(j["id"]) for j in jobs]
    lanes = max(len(jobs), 1)
    states = _lanes(low, jobs, colour, t0)
    row = {job_id: lanes - 1 - i for i, job_id in enumerate(ids)}
    for m in marks:
        marker, face, _ = MARKS[m.kind]
        low.plot(
            m.t,
            row[m.job_id],
            marker=marker,
            markersize=8,
            markerfacecolor=face,
            markeredgecolor="black",
            markeredgewidth=0.9,
            linestyle="none",
            zorder=5,
        )
        if m.note:
            low.annotate(
                m.note,
                (m.t, row[m.job_id]),
                xytext=(0, 7),
                textcoords="offset points",
                ha="center",
                va="bottom",
                fontsize=7,
            )
    low.set_yticks([row[i] for i in ids], [str(j["name"]) for j in jobs], fontsize="small")
    low.set_ylim(-0.6, lanes - 0.15)  # room for the top lane's resize notes
    low.set_xlim(0, end)
    low.set_xlabel("seconds since the first submission")
    low.grid(axis="x", alpha=0.3)
    low.legend(
        handles=_event_legend(states, marks),
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        fontsize="small",
        title="events",
    )


def _event_legend(states: set[str], marks: Sequence[Mark]) -> list[Any]:
    """The lanes' legend: the states drawn, then each kind of event marked."""
    handles: list[Any] = (
        [Patch(facecolor="#cccccc", label="waiting")] if "waiting" in states else []
    )
    if "suspended" in states:
        handles.append(Patch(facecolor="white", edgecolor="grey", hatch="///", label="suspended"))
    handles += [
        Line2D(
            [],
            [],
            marker=marker,
            markerfacecolor=face,
            markeredgecolor="black",
            linestyle="none",
            markersize=7,
            label=label,
        )
        for kind, (marker, face, label) in MARKS.items()
        if any(m.kind == kind for m in marks)
    ]
    return handles


def gpu_timeline(
    jobs: Sequence[Job], capacity: int, path: Path, *, title: str | None = None
) -> Path:
    """Draw :func:`draw_gpu_timeline` and write it to ``path`` (PNG, 120 dpi)."""
    fig = draw_gpu_timeline(jobs, capacity, title=title)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path
