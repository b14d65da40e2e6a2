"""Pollux's published workloads and profiles, played as they are (OSDI'21, §5.1).

A Pollux workload CSV names, per job, its arrival, its application and the
GPUs and global batch a user tuned for it (``name,time,application,
num_replicas,batch_size``); each application's profile is a folder of
measurements (``perf.measured``). Played on Pollux's testbed: 16 nodes of 4
GPUs, a decision every 60 s, 30 s lost at every (re)start.

Pollux's simulator sets a few things in code rather than in its files; they
are here, from its ``applications.py`` and ``simulator.py`` (artifact branch
``osdi21-artifact``): the epochs each application trains for, yolov3's
largest per-GPU batch, and ncf held to one GPU. A profile folder of another
name trains for every epoch of its shortest validation run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ringleader.perf.measured import MeasuredJob, read_measured_job
from ringleader.perf.profile_files import ProfileError, csv_rows, number, whole
from ringleader.policy.model.plan import Decider
from ringleader.policy.model.views import ClusterView
from ringleader.sim.engine import Simulator
from ringleader.sim.result import SimResult
from ringleader.sim.submitted import SimJob
from ringleader.sim.tabled import TabledProfile, job_profile, spread_over

NODES = 16
GPUS_PER_NODE = 4
ROUND_S = 60.0
RESTART_S = 30.0
DATA = Path(__file__).resolve().parents[1] / "data" / "pollux"
"""The Pollux data shipped with ringleader (``data/pollux/SOURCE.md``)."""
TIRESIAS_THRESHOLDS_GPU_S = (57_600.0,)
"""Pollux's Tiresias baseline: two queues, split at 16 GPU-hours (its ``tiresias.py``)."""
ADAPTIVE_POLICIES = frozenset({"pollux", "pollux-shortest", "sia", "ringleader"})
"""Policies whose jobs pick their own batch (Pollux's runs; the default sizes them by the
goodput their gradients report); the others play each job at the GPUs and batch its row
gives, tuned by hand (Pollux's "TunedJobs" baselines)."""
LOADS = ("0.5", "1.0", "1.5", "2.0")
"""The job loads Pollux published workloads and results for (its Figure 8b)."""


@dataclass(frozen=True, slots=True)
class Application:
    """What Pollux's simulator fixes in code for one application."""

    epochs: int | None = None
    """Epochs to train (None: every epoch of the shortest validation run)."""
    max_micro_batch: int | None = None
    """Largest per-GPU batch (None: the largest in its step-time table)."""
    max_gpus: int | None = None
    """GPUs a job may hold at most (None: as many as its global batch spreads over)."""
    adapts: bool = True
    """A job of it picks its own batch where jobs adapt (ncf: Pollux fixes its batch)."""


APPLICATIONS: Mapping[str, Application] = {
    "bert": Application(epochs=2),
    "cifar10": Application(epochs=100),
    "ncf": Application(epochs=10, max_gpus=1, adapts=False),
    "imagenet": Application(epochs=90),
    "deepspeech2": Application(epochs=80),
    "yolov3": Application(epochs=50, max_micro_batch=8),
}


def cluster() -> ClusterView:
    """Pollux's testbed: 16 nodes of 4 GPUs."""
    return ClusterView.uniform(NODES, GPUS_PER_NODE)


def read_profiles(folder: Path, names: Sequence[str]) -> dict[str, MeasuredJob]:
    """The profiles of the applications ``names`` from ``folder/<name>/``."""
    if not folder.is_dir():
        raise ProfileError(f"{folder}: no such profiles folder (give Pollux's traces/ folder)")
    found = {}
    for name in dict.fromkeys(names):
        app = APPLICATIONS.get(name, Application())
        where = folder / name
        if not where.is_dir():
            raise ProfileError(
                f"{where}: no profile for application {name!r}; the folder holds "
                f"{', '.join(sorted(p.name for p in folder.iterdir() if p.is_dir())) or 'none'}"
            )
        found[name] = read_measured_job(
            where, epochs=app.epochs, max_micro_batch=app.max_micro_batch
        )
    return found


@dataclass(frozen=True, slots=True)
class PolluxRow:
    """One job of a Pollux workload file."""

    name: str
    time: float
    application: str
    gpus: int
    batch: int


def read_workload(path: Path) -> list[PolluxRow]:
    """The rows of a Pollux workload CSV; ``ProfileError`` names the line and field."""
    rows = []
    seen: set[str] = set()
    fields = ("name", "time", "application", "num_replicas", "batch_size")
    for line, row in csv_rows(path, fields):
        name = (row.get("name") or "").strip()
        if not name:
            raise ProfileError(f"{path}:{line}: name is empty; give each job a name")
        if name in seen:
            raise ProfileError(f"{path}:{line}: name {name!r} is used twice; names are unique")
        seen.add(name)
        time = number(path, line, row, "time")
        if time < 0:
            raise ProfileError(f"{path}:{line}: time {time:g} must be seconds >= 0")
        app = (row.get("application") or "").strip()
        if not app or "/" in app or app.startswith("."):
            raise ProfileError(
                f"{path}:{line}: application {app!r} must name a profile folder (e.g. cifar10)"
            )
        gpus, batch = (whole(path, line, row, f) for f in ("num_replicas", "batch_size"))
        rows.append(PolluxRow(name, time, app, gpus, batch))
    if not rows:
        raise ProfileError(f"{path}: no jobs (a header and no rows)")
    return rows


def pollux_jobs(
    workload: Path,
    profiles: Path,
    models: Mapping[str, MeasuredJob] | None = None,
    *,
    adaptive: bool = False,
) -> list[SimJob]:
    """A Pollux workload as simulated jobs, each at the GPUs and batch its row gives.

    A job asks for its row's GPUs (what a fixed-size policy gives it) and may hold up
    to as many as its global batch spreads over at the smallest per-GPU batch measured
    (what an elastic one may give it), within the cluster. ``models``: the profiles
    read already (``read_profiles``), to play many workloads without reading them again.
    ``adaptive``: jobs pick their own batch as they train (Pollux's own runs), and may
    hold as many GPUs as the largest validated batch spreads over.
    """
    rows = read_workload(workload)
    if not profiles.is_dir():
        raise ProfileError(f"{profiles}: no such profiles folder (give Pollux's traces/ folder)")
    for line, row in enumerate(rows, start=2):
        if not (profiles / row.application).is_dir():
            held = sorted(p.name for p in profiles.iterdir() if p.is_dir())
            raise ProfileError(
                f"{workload}:{line}: application {row.application!r} has no profile in "
                f"{profiles} (it holds {', '.join(held) or 'none'})"
            )
    if models is None or not {r.application for r in rows} <= models.keys():
        models = read_profiles(profiles, [r.application for r in rows])
    capacity = NODES * GPUS_PER_NODE
    made: dict[tuple[str, int, int, bool], TabledProfile] = {}
    jobs = []
    for line, row in enumerate(rows, start=2):
        model = models[row.application]
        app = APPLICATIONS.get(row.application, Application())
        adapts = adaptive and app.adapts
        widest = spread_over(model, row.batch, adaptive=adapts)
        widest = widest if app.max_gpus is None else app.max_gpus
        most = max(row.gpus, min(capacity, widest))
        if row.gpus > capacity:
            raise ProfileError(
                f"{workload}:{line}: num_replicas {row.gpus} is more than the cluster's "
                f"{capacity} GPUs"
            )
        key = (row.application, row.batch, most, adapts)
        profile = made.get(key)
        if profile is None:
            try:
                model.check_batch(row.batch)
            except ProfileError as err:
                raise ProfileError(f"{workload}:{line}: batch_size: {err}") from None
            try:
                profile = job_profile(
                    model, row.batch, adaptive=adapts, max_gpus=most, per_node=GPUS_PER_NODE
                )
            except ProfileError as err:
                raise ProfileError(f"{workload}:{line}: {err}") from None
            made[key] = profile
        jobs.append(
            SimJob(
                id=row.name,
                submitted_at=row.time,
                profile=profile,
                max_gpus=max(row.gpus, min(most, max(profile.step_times))),
                min_gpus=1,
                requested_gpus=row.gpus,
                startup_s=RESTART_S,
                restart_s=RESTART_S,
            )
        )
    return jobs


def bundled_workload(name: str, load: str = "1.0") -> Path:
    """The bundled workload ``name`` (``workload-3``) at ``load`` (one of ``LOADS``)."""
    return DATA / ("workloads" if load == "1.0" else f"workloads-{load}") / f"{name}.csv"


def published_avg(policy: str, name: str, load: str = "1.0") -> float | None:
    """The average JCT Pollux's own simulator published for a bundled workload under
    ``policy`` (``pollux``, ``tiresias``, ``optimus``), if it published one."""
    summary = DATA / "results-jobload" / f"{policy}-{load}" / "summary.json"
    if not summary.is_file():
        return None
    avg = json.loads(summary.read_text())["avgs"].get(name)
    return None if avg is None else float(avg)


def play(
    jobs: Sequence[SimJob],
    policy: Decider,
    *,
    on_finish: Callable[[int, int], None] | None = None,
    explain: bool = False,
    until: float | None = None,
) -> SimResult:
    """``jobs`` under ``policy`` on Pollux's testbed, deciding every 60 s as it does
    (``until``: stop the clock there)."""
    return Simulator(
        policy,
        cluster(),
        jobs,
        restart_delay_s=RESTART_S,
        round_s=ROUND_S,
        tick_s=ROUND_S,
        on_finish=on_finish,
        explain=explain,
        until=until,
    ).run()
