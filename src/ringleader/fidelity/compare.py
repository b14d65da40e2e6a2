"""A fidelity run's verdict: real and simulated completion times, side by side.

The JSON has one entry per policy:
``{"policies": {NAME: {"real_avg_jct_s", "sim_avg_jct_s", "avg_jct_error",
"real_makespan_s", "sim_makespan_s", "jobs": [{"name", "real_jct_s",
"sim_jct_s"}], "measured": {...}, "counts": {"real": {...}, "sim": {...}}}}}``
where ``avg_jct_error`` is sim/real − 1.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ringleader.fidelity.measure import Measured
from ringleader.fidelity.real import RealRun
from ringleader.sim.result import SimResult


@dataclass(frozen=True, slots=True)
class Comparison:
    policy: str
    jobs: list[dict[str, Any]]
    real_avg_jct_s: float
    sim_avg_jct_s: float
    real_makespan_s: float
    sim_makespan_s: float
    measured: dict[str, Any]
    counts: dict[str, dict[str, int]]
    real_wall_s: float

    @property
    def avg_jct_error(self) -> float:
        return self.sim_avg_jct_s / self.real_avg_jct_s - 1.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "real_avg_jct_s": round(self.real_avg_jct_s, 3),
            "sim_avg_jct_s": round(self.sim_avg_jct_s, 3),
            "avg_jct_error": round(self.avg_jct_error, 4),
            "real_makespan_s": round(self.real_makespan_s, 3),
            "sim_makespan_s": round(self.sim_makespan_s, 3),
            "real_wall_s": round(self.real_wall_s, 1),
            "jobs": [
                {k: round(v, 3) if isinstance(v, float) else v for k, v in j.items()}
                for j in self.jobs
            ],
            "measured": self.measured,
            "counts": self.counts,
        }


def compare(run: RealRun, measured: Measured, sim: SimResult, wall_s: float) -> Comparison:
    """Pair each job's real and simulated JCT (jobs the replay left out are not paired)."""
    simulated = {r.id: r for r in sim.records}
    sim_t0 = min(r.submitted_at for r in sim.records)
    t0 = min(j.submitted_at for j in run.jobs)
    jobs: list[dict[str, Any]] = []
    for real in run.jobs:
        record = simulated.get(real.name)
        if real.jct_s is None or record is None or record.jct is None:
            continue
        jobs.append(
            {
                "name": real.name,
                "real_jct_s": round(real.jct_s, 3),
                "sim_jct_s": round(record.jct, 3),
            }
        )
    if not jobs:
        raise ValueError(f"policy {run.policy}: no job finished in both bodies")
    names = {j["name"] for j in jobs}
    real_end = max(j.finished_at or t0 for j in run.jobs if j.name in names) - t0
    sim_end = max(r.finished_at or sim_t0 for r in sim.records if r.id in names) - sim_t0
    real_counts: dict[str, int] = {}
    for real in run.jobs:
        for e in real.events:
            if e["kind"] == "launched" and "counted" in e:
                real_counts[e["counted"]] = real_counts.get(e["counted"], 0) + 1
            elif e["kind"] in ("suspend_requested", "resume_requested"):
                kind = e["kind"].removesuffix("_requested")
                real_counts[kind] = real_counts.get(kind, 0) + 1
    return Comparison(
        policy=run.policy,
        jobs=jobs,
        real_avg_jct_s=statistics.fmean(j["real_jct_s"] for j in jobs),
        sim_avg_jct_s=statistics.fmean(j["sim_jct_s"] for j in jobs),
        real_makespan_s=real_end,
        sim_makespan_s=sim_end,
        measured=_measured(measured),
        counts={"real": real_counts, "sim": dict(sim.counts)},
        real_wall_s=wall_s,
    )


def _measured(m: Measured) -> dict[str, Any]:
    return {
        "switch_s": None if m.switch_s is None else round(m.switch_s, 3),
        "restart_s": None if m.restart_s is None else round(m.restart_s, 3),
        "jobs": {
            name: {
                "step_time_s": {str(w): round(t, 5) for w, t in sorted(j.step_times.items())},
                "startup_s": round(j.startup_s, 3),
                "restart_s": None if j.restart_s is None else round(j.restart_s, 3),
            }
            for name, j in m.jobs.items()
        },
        "notes": m.notes,
    }


def fidelity_plot(results: dict[str, Comparison], path: Path) -> Path:
    """Per policy, each job's simulated JCT against its real one, with the diagonal."""
    import matplotlib.pyplot as plt

    from ringleader.report.plots import save_figure

    fig, axes = plt.subplots(1, len(results), figsize=(4.6 * len(results), 4.4), squeeze=False)
    for ax, (name, c) in zip(axes[0], results.items(), strict=True):
        real = [j["real_jct_s"] for j in c.jobs]
        sim = [j["sim_jct_s"] for j in c.jobs]
        top = max([*real, *sim]) * 1.08
        ax.plot([0, top], [0, top], color="grey", lw=1, ls="--", label="sim = real")
        ax.scatter(real, sim, zorder=3)
        for j in c.jobs:
            ax.annotate(
                j["name"],
                (j["real_jct_s"], j["sim_jct_s"]),
                fontsize=7,
                xytext=(3, 3),
                textcoords="offset points",
            )
        ax.set_xlim(0, top)
        ax.set_ylim(0, top)
        ax.set_xlabel("real JCT (s)")
        ax.set_ylabel("simulated JCT (s)")
        ax.set_title(
            f"{name}: avg JCT {c.real_avg_jct_s:.0f} s real, "
            f"{c.sim_avg_jct_s:.0f} s sim ({c.avg_jct_error:+.1%})",
            fontsize=9,
        )
        ax.legend(loc="upper left", fontsize=8)
    return save_figure(fig, path)
