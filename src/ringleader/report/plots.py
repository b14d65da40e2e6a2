"""Plots where a picture beats a table: JCT distributions, GPU use, training curves."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import MaxNLocator

from ringleader.metrics import UsagePoint


def save_figure(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _cdf(ax: object, values: Sequence[float], label: str) -> None:
    data = np.sort(np.asarray(values, dtype=float))
    if len(data) == 0:
        return
    y = np.arange(1, len(data) + 1) / len(data)
    ax.step(data, y, where="post", label=label)  # type: ignore[attr-defined]


def jct_cdf_grid(
    panels: Mapping[str, Mapping[str, Sequence[float]]],
    path: Path,
    *,
    title: str,
    unit: str = "hours",
) -> Path:
    """One panel per key of ``panels`` (e.g. a load), one CDF line per strategy."""
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), squeeze=False)
    for ax, (panel, lines) in zip(axes[0], panels.items(), strict=True):
        for label, values in lines.items():
            _cdf(ax, values, label)
        ax.set_title(panel)
        ax.set_xlabel(f"job completion time ({unit})")
        ax.set_ylabel("fraction of jobs")
        ax.grid(alpha=0.3)
        ax.set_ylim(0, 1.02)
    axes[0][0].legend(loc="lower right", fontsize="small")
    fig.suptitle(title)
    return save_figure(fig, path)


BINS = 120
"""Spans a run's time is cut into where several runs' GPU use share one axis."""


def binned_mean(
    steps: Sequence[tuple[float, float]], end: float, bins: int = BINS
) -> tuple[Any, Any]:
    """A step function (value from each time until the next) averaged over ``bins``
    equal spans up to ``end``: bin centres and means. Raw steps of several runs drawn
    on one axis sit on top of each other; their means over a bin can be told apart."""
    if not steps or end <= steps[0][0]:
        return np.array([]), np.array([])
    times = np.array([t for t, _ in steps] + [end], dtype=float)
    values = np.array([v for _, v in steps], dtype=float)
    edges = np.linspace(times[0], end, bins + 1)
    area = np.concatenate([[0.0], np.cumsum(values * np.diff(times))])
    # The integral up to each edge: the areas before it, plus the part of its step.
    at = np.clip(np.searchsorted(times, edges, side="right") - 1, 0, len(values) - 1)
    integral = area[at] + values[at] * (edges - times[at])
    return (edges[:-1] + edges[1:]) / 2, np.diff(integral) / np.diff(edges)


def run_overview(
    jcts_h: Sequence[float], usage: Sequence[UsagePoint], gpus: int, path: Path, *, title: str
) -> Path:
    """A single run: its JCT CDF beside GPUs in use and jobs in the system over time.

    GPUs and jobs count different things, so jobs get an axis of their own; GPUs held
    are an area with the GPUs running workers drawn over it."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    _cdf(left, jcts_h, "jobs")
    left.set_xlabel("job completion time (hours)")
    left.set_ylabel("fraction of jobs")
    left.grid(alpha=0.3)
    times = [p.time / 3600 for p in usage]
    right.fill_between(times, [p.held for p in usage], step="post", alpha=0.25, label="GPUs held")
    right.step(times, [p.busy for p in usage], where="post", label="GPUs running workers")
    right.axhline(gpus, color="grey", linestyle=":", label="cluster GPUs")
    right.set_ylim(0, gpus * 1.08)
    right.set_xlabel("time (hours)")
    right.set_ylabel("GPUs")
    right.grid(alpha=0.3)
    jobs = right.twinx()
    jobs.step(times, [p.jobs for p in usage], where="post", color="tab:red", alpha=0.7)
    jobs.set_ylabel("jobs in the system", color="tab:red")
    jobs.tick_params(axis="y", colors="tab:red")
    jobs.set_ylim(bottom=0)
    jobs.yaxis.set_major_locator(MaxNLocator(integer=True))
    handles, labels = right.get_legend_handles_labels()
    right.legend(handles, labels, fontsize="small", loc="upper left")
    fig.suptitle(title)
    return save_figure(fig, path)


def training_curves(
    jobs: Sequence[Mapping[str, object]],
    progress: Mapping[str, Sequence[Mapping[str, object]]],
    path: Path,
) -> Path:
    """Loss against global step per job, resizes marked.

    GPUs per job over time is ``report.timeline.gpu_timeline``'s picture.
    """
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for job in jobs:
        recs = [r for r in progress.get(str(job["id"]), []) if "loss" in r]
        if not recs:
            continue
        steps = [float(str(r["step"])) for r in recs]
        line = ax.plot(steps, [float(str(r["loss"])) for r in recs], label=str(job["name"]))[0]
        changes = [
            i for i in range(1, len(recs)) if recs[i]["world_size"] != recs[i - 1]["world_size"]
        ]
        ax.plot(
            [steps[i] for i in changes],
            [float(str(recs[i]["loss"])) for i in changes],
            "o",
            color=line.get_color(),
        )
    ax.set_xlabel("global step")
    ax.set_ylabel("training loss")
    ax.set_title("loss by step (dots: resized)")
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    return save_figure(fig, path)


def tensorlights_plot(result: Mapping[str, object], path: Path) -> Path:
    """FIFO JCT by placement, and One/RoundRobin normalised to FIFO, ours beside the seed's."""
    ours = result["ours"]
    paper = result["paper"]
    assert isinstance(ours, dict) and isinstance(paper, dict)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    xs = list(range(1, len(ours["fifo_jct_s"]) + 1))
    left.plot(xs, ours["fifo_jct_s"], "o-", label="ours (FIFO)")
    left.plot(xs[: len(paper["fifo_jct_s"])], paper["fifo_jct_s"], "s--", label="paper (FIFO)")
    left.set_xlabel("placement (#1 skewed ... #8 uniform)")
    left.set_ylabel("average JCT (s)")
    left.legend()
    left.grid(alpha=0.3)
    for key, label in (("one_norm", "One"), ("rr_norm", "RoundRobin")):
        line = right.plot(xs, ours[key], "o-", label=f"ours ({label})")[0]
        right.plot(
            xs[: len(paper[key])],
            paper[key],
            "s--",
            color=line.get_color(),
            label=f"paper ({label})",
        )
    right.axhline(1.0, color="grey", linestyle=":")
    right.set_xlabel("placement")
    right.set_ylabel("JCT normalised to FIFO")
    right.legend(fontsize="small")
    right.grid(alpha=0.3)
    return save_figure(fig, path)


def sharing_plot(result: Mapping[str, object], path: Path) -> Path:
    """Ours beside the paper's for a Gandiva scenario: one panel per metric."""
    ours = result["ours"]
    paper = result["paper"]
    ci = result["ci95"]
    assert isinstance(ours, dict) and isinstance(paper, dict) and isinstance(ci, dict)
    keys = list(ours)
    fig, axes = plt.subplots(1, len(keys), figsize=(3.2 * len(keys), 3.4), squeeze=False)
    for ax, key in zip(axes[0], keys, strict=True):
        ax.bar([0], [ours[key]], 0.6, yerr=[ci[key]], capsize=6, label="ours (95% CI)")
        ax.bar([1], [paper[key]], 0.6, label="paper")
        ax.set_xticks([0, 1], ["ours", "paper"])
        ax.set_title(key)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(f"{result.get('scenario', '')}: sharing against no sharing")
    return save_figure(fig, path)


def heterogeneity_plot(results: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Average JCT against load, type-aware solid and type-agnostic dashed, one colour per
    policy; a hollow marker where the run did not keep up (the backlog kept growing)."""
    fig, ax = plt.subplots(figsize=(7, 4.2))
    policies = sorted({str(r["policy"]) for r in results})
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, policy in enumerate(policies):
        for aware in (True, False):
            rows = sorted(
                (r for r in results if r["policy"] == policy and r["type_aware"] is aware),
                key=lambda r: float(r["load"]),
            )
            if not rows:
                continue
            loads = [float(r["load"]) for r in rows]
            hours = [float(r["avg_jct_s"]) / 3600 for r in rows]
            style = "-" if aware else "--"
            label = f"{policy} ({'type-aware' if aware else 'agnostic'})"
            colour = colours[i % len(colours)]
            ax.plot(loads, hours, style, color=colour, label=label)
            for x, y, r in zip(loads, hours, rows, strict=True):
                face = colour if r["stable"] else "white"
                ax.plot([x], [y], "o", color=colour, markerfacecolor=face)
    ax.set_xlabel("load (jobs per hour)")
    ax.set_ylabel("average JCT (hours)")
    ax.set_title("36 GPUs (V100/P100/K80): hollow = backlog grows")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def failures_plot(
    rows: Sequence[Mapping[str, Any]], placements: Sequence[Mapping[str, Any]], path: Path
) -> Path:
    """The ``llm-cluster`` scenario: per checkpoint variant, the gang's ETTR and where the
    GPU-hours that were not useful went (stacked by cause); per placement rule, the gang
    mix's average JCT over the topology-blind rule's."""
    fig, (left, middle, right) = plt.subplots(1, 3, figsize=(14, 4.2))
    names = [str(r["variant"]) for r in rows]
    left.bar(names, [float(r["gang_ettr"]) for r in rows], color="tab:blue")
    left.axhline(0.9, color="grey", linestyle="--", label="Llama 3 report: above 0.90")
    left.set_ylim(0, 1)
    left.set_ylabel("gang ETTR (useful time / wall time)")
    left.legend(fontsize=8)
    bottom = np.zeros(len(rows))
    for cause in ("failure", "checkpoint", "restart", "queueing"):
        hours = np.asarray([float(r["cluster_lost_gpu_h"][cause]) / 1e3 for r in rows])
        middle.bar(names, hours, bottom=bottom, label=cause)
        bottom += hours
    middle.set_ylabel("GPU-hours lost, thousands")
    middle.set_title("the whole cluster, by cause")
    middle.legend(fontsize=8)
    rules = [str(r["placement"]).replace(" (blind)", "\n(blind)") for r in placements]
    right.bar(rules, [float(r["over_blind"]) for r in placements], color="tab:green")
    right.axhline(1.0, color="grey", linestyle="--")
    right.set_ylabel("average JCT over topology-blind")
    right.set_title("gangs on racks, 4x slower between them")
    return save_figure(fig, path)
