"""Every policy on every trace family in the repo: does the default win everywhere?

Families (issue 17):

* ``itp`` — the eight ITP clusters, each at its recommended size;
* ``philly`` — Gavel's Philly-derived virtual clusters with at least 100 jobs;
* ``poisson`` — generated jobs (1-8 GPUs, log-normal durations, elastic up
  to 8 GPUs) arriving at three loads on 64 GPUs;
* ``table3`` — the ring-allreduce seed's extreme-contention setting, five seeds.

Writes bench/results/policies.json: average and p99 JCT per workload and
policy, and per family the goal's check — the default's average JCT at most
0.9 × the best other policy's, and its p99 no worse than Tiresias'. The
oracle ``srtf-oracle`` is reported as a bound, not compared. Also draws
docs/img/policies-cdf.png, the JCT CDF per policy and family.

    python bench/policies.py [--quick] [--processes N]

``--quick`` runs one workload per family (for a look, not for the record).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from collections.abc import Callable
from multiprocessing import Pool
from pathlib import Path
from typing import Any

from _common import calibration_s, commit, trace_workload
from ringleader.metrics import percentile
from ringleader.policy import ClusterView, policy_named
from ringleader.scenarios import table3
from ringleader.sim import RESNET110_K40, SimJob, Simulator
from ringleader.traces.jobs import GPUS_PER_NODE
from ringleader.traces.load import available_traces, load_trace, resolve_trace

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "results" / "policies.json"
FIGURE = ROOT / "docs" / "img" / "policies-cdf.png"
DEFAULT = "ringleader"
OTHERS = ("tiresias", "fifo", "precompute", "optimus", "elastic", "gandiva")
BOUND = "srtf-oracle"
POLICIES = (DEFAULT, *OTHERS, BOUND)
POISSON_GPUS = 64
POISSON_LOADS = {"low": 0.5, "medium": 0.8, "high": 1.1}
POISSON_JOBS = 600
MIN_PHILLY_JOBS = 100


def _trace(name: str) -> tuple[ClusterView, list[SimJob]]:
    return trace_workload(name)


def _poisson(load: float, seed: int = 0) -> tuple[ClusterView, list[SimJob]]:
    """``POISSON_JOBS`` jobs whose requested GPU-seconds arrive at ``load`` × capacity.

    Sizes 1/2/4/8 GPUs (weights 4/3/2/1), durations at the requested size
    log-normal with a median of one hour (sigma 1.2, capped at 3 days); each job is
    elastic from 1 to 8 GPUs, shaped like ResNet-110 (``traces.jobs``).
    """
    rng = random.Random(seed)
    sizes, weights = (1, 2, 4, 8), (4, 3, 2, 1)
    specs = []
    for _ in range(POISSON_JOBS):
        gpus = rng.choices(sizes, weights)[0]
        duration = min(3600.0 * math.exp(rng.gauss(0.0, 1.2)), 3 * 86_400.0)
        specs.append((gpus, duration))
    mean_work = sum(g * d for g, d in specs) / len(specs)
    gap = mean_work / (load * POISSON_GPUS)
    at, jobs = 0.0, []
    for i, (gpus, duration) in enumerate(specs):
        at += rng.expovariate(1.0 / gap)
        scale = duration / RESNET110_K40.seconds_alone(gpus)
        jobs.append(
            SimJob(
                f"p{i:04d}", at, RESNET110_K40, max_gpus=8, requested_gpus=gpus, work_scale=scale
            )
        )
    return ClusterView.uniform(POISSON_GPUS // GPUS_PER_NODE, GPUS_PER_NODE), jobs


def _table3(seed: int) -> tuple[ClusterView, list[SimJob]]:
    return table3.cluster(), table3.workload("extreme", seed)


Recipe = tuple[str, Any]
"""A builder's name in ``_BUILDERS`` and its argument: built in the worker process."""


def workloads(quick: bool) -> dict[str, dict[str, Recipe]]:
    """Family → workload name → how to build it."""
    philly = []
    for name in available_traces():
        if name.startswith("gavel:"):
            path, fmt = resolve_trace(name)
            if len(load_trace(path, fmt)) >= MIN_PHILLY_JOBS:
                philly.append(name)
    families: dict[str, dict[str, Recipe]] = {
        "itp": {n: _bind(_trace, n) for n in available_traces() if n.startswith("itp:")},
        "philly": {n: _bind(_trace, n) for n in philly},
        "poisson": {f"poisson:{k}": _bind(_poisson, v) for k, v in POISSON_LOADS.items()},
        "table3": {f"table3:extreme:seed{s}": _bind(_table3, s) for s in range(5)},
    }
    if quick:
        return {f: dict(list(w.items())[:1]) for f, w in families.items()}
    return families


def _bind(fn: Callable[[Any], tuple[ClusterView, list[SimJob]]], arg: Any) -> Recipe:
    return (fn.__name__, arg)


_BUILDERS: dict[str, Callable[[Any], tuple[ClusterView, list[SimJob]]]] = {
    "_trace": _trace,
    "_poisson": _poisson,
    "_table3": _table3,
}


def _run(task: tuple[str, str, Recipe, str]) -> dict[str, Any]:
    family, name, (builder, arg), policy = task
    cluster, jobs = _BUILDERS[builder](arg)
    started = time.perf_counter()
    result = Simulator(policy_named(policy), cluster, jobs).run()
    jcts = [r.jct for r in result.records if r.jct is not None]
    return {
        "family": family,
        "workload": name,
        "policy": policy,
        "jobs": len(jobs),
        "gpus": cluster.capacity,
        "finished": len(jcts),
        "avg_jct_s": round(result.summary.avg_jct_s, 1),
        "p99_jct_s": round(percentile(jcts, 99), 1),
        "utilization": round(result.summary.utilization, 4),
        "resizes": result.counts.get("resize", 0),
        "wall_s": round(time.perf_counter() - started, 2),
        "jcts": jcts,
    }


def _verdict(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The goal on one workload: the default against the best other and Tiresias."""
    by = {r["policy"]: r for r in rows}
    mine = by[DEFAULT]
    best = min((by[p] for p in OTHERS if p in by), key=lambda r: r["avg_jct_s"])
    return {
        "best_other": best["policy"],
        "avg_ratio_to_best_other": round(mine["avg_jct_s"] / best["avg_jct_s"], 4),
        "p99_ratio_to_tiresias": round(mine["p99_jct_s"] / by["tiresias"]["p99_jct_s"], 4),
        "avg_goal": mine["avg_jct_s"] <= 0.9 * best["avg_jct_s"],
        "p99_goal": mine["p99_jct_s"] <= by["tiresias"]["p99_jct_s"],
    }


def _plot(rows: list[dict[str, Any]], families: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    fig, axes = plt.subplots(1, len(families), figsize=(4.2 * len(families), 3.6), squeeze=False)
    for ax, family in zip(axes[0], families, strict=True):
        for policy in POLICIES:
            jcts = sorted(
                j / 3600
                for r in rows
                if r["family"] == family and r["policy"] == policy
                for j in r["jcts"]
            )
            if not jcts:
                continue
            ys = [(i + 1) / len(jcts) for i in range(len(jcts))]
            style = {"linewidth": 2.4} if policy == DEFAULT else {"linewidth": 1.1}
            if policy == BOUND:
                style["linestyle"] = ":"
            ax.plot(jcts, ys, label=policy, **style)
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())  # no crowded labels on short ranges
        ax.set_title(family)
        ax.set_xlabel("JCT (hours, log)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("fraction of jobs")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8, frameon=False)
    fig.suptitle("JCT CDF per policy, pooled over each family's workloads")
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    FIGURE.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(FIGURE, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one workload per family")
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--families", default="", help="comma-separated subset")
    args = parser.parse_args()
    families = workloads(args.quick)
    if args.families:
        families = {f: w for f, w in families.items() if f in args.families.split(",")}
    tasks = [
        (family, name, build, policy)
        for family, named in families.items()
        for name, build in named.items()
        for policy in POLICIES
    ]
    # Longest first: the big ITP traces should not start last.
    tasks.sort(key=lambda t: (t[0] != "itp", t[3] != "gandiva"))
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    with Pool(args.processes) as pool:
        for row in pool.imap_unordered(_run, tasks):
            rows.append(row)
            print(
                f"[{len(rows)}/{len(tasks)}] {row['workload']} {row['policy']}: "
                f"avg {row['avg_jct_s']:.0f} s, p99 {row['p99_jct_s']:.0f} s ({row['wall_s']} s)",
                file=sys.stderr,
                flush=True,
            )
    report: dict[str, Any] = {
        "what": "average and p99 JCT of every policy on every trace family; the goal: the "
        "default's average at most 0.9x the best other policy's, its p99 no worse than "
        "Tiresias'",
        "command": "python bench/policies.py" + (" --quick" if args.quick else ""),
        "commit": commit(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "calibration_s": calibration_s(),
        "wall_s": round(time.perf_counter() - started, 1),
        "default": DEFAULT,
        "others": list(OTHERS),
        "bound": BOUND,
        "families": {},
    }
    for family, named in families.items():
        entry: dict[str, Any] = {"workloads": {}}
        for name in named:
            mine = [r for r in rows if r["workload"] == name]
            cells = {
                r["policy"]: {k: v for k, v in r.items() if k not in ("jcts", "family", "workload")}
                for r in sorted(mine, key=lambda r: POLICIES.index(r["policy"]))
            }
            entry["workloads"][name] = {"policies": cells, **_verdict(mine)}
        verdicts = entry["workloads"].values()
        entry["avg_goal_met_on"] = sum(v["avg_goal"] for v in verdicts)
        entry["p99_goal_met_on"] = sum(v["p99_goal"] for v in verdicts)
        entry["of"] = len(verdicts)
        entry["worst_avg_ratio"] = max(v["avg_ratio_to_best_other"] for v in verdicts)
        report["families"][family] = entry
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=1) + "\n")
    _plot(rows, list(families))
    summary = {
        f: {k: e[k] for k in ("avg_goal_met_on", "p99_goal_met_on", "of", "worst_avg_ratio")}
        for f, e in report["families"].items()
    }
    print(json.dumps(summary, indent=1))
    print(f"wrote {OUT.relative_to(ROOT)} and {FIGURE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
