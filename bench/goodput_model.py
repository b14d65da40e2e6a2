"""What the default's online model costs it on Pollux's workloads (issue 58).

The default sizes jobs that adapt their batch by goodput from a step-time
model it fits online (``policy.profile.sources.Online``) and the gradient
statistics they report; ``pollux`` is told each job's true table. This plays
each of Pollux's seven workloads at one load three ways, on the same jobs:

* ``ringleader``: the default, as it is;
* ``ringleader-true``: the default with the true tables (``Precompute``), every
  other stage the same: what a perfect model would give it;
* ``pollux``: the baseline the goal is measured against.

While the default plays, every decision also asks, for each job that reports
its gradient, its best goodput on 1, 2, 4 ... GPUs by the online model and by
the true table, and keeps the ratio (online over true) by application, by
count, and by whether the job had run at that many GPUs or more ("seen") or
not ("beyond"). A ratio above 1 is a model that promises more than the GPUs
give. Writes bench/results/goodput-model.json and prints both tables.

    python bench/goodput_model.py [--load 1.0] [--processes 2]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

from _common import results_file, stamp
from published import Timed, bundled_jobs, workloads
from ringleader.perf.goodput import GoodputSpeed
from ringleader.perf.gradient import best_goodput
from ringleader.policy.catalog import policy_named
from ringleader.policy.model.plan import Decider, Plan
from ringleader.policy.model.views import ClusterView, JobView
from ringleader.policy.pipeline import Policy
from ringleader.policy.profile.sources import Online, Precompute
from ringleader.sim import pollux

COUNTS = (1, 2, 4, 8, 16, 32)
VARIANTS = ("ringleader", "ringleader-true", "pollux")


class Asking(Timed):
    """The default, and at each decision the online model's goodput against the truth
    (a ``Timed`` decider, for its name and needs; the times are not read)."""

    def __init__(self, policy: Decider, truth: dict[str, tuple[str, GoodputSpeed]]) -> None:
        super().__init__(policy)
        self.truth = truth
        """Each job's application and its true goodput, by job id."""
        self.errors: dict[tuple[str, str, int], list[float]] = defaultdict(list)

    def decide(self, jobs: Sequence[JobView], cluster: ClusterView, now: float) -> Plan:
        for view in jobs:
            if view.gradient is None or not view.observations:
                continue
            model, _ = Online.plain_model(view, cluster.widest_node)
            app, truth = self.truth[view.id]
            done = 1.0 - view.remaining_fraction
            for k in COUNTS:
                if k > view.max_gpus:
                    break
                true, told = truth.goodput(k, done), best_goodput(model, view.gradient, k)
                if true > 0 and told > 0:
                    where = "seen" if max(view.observations) >= k else "beyond"
                    self.errors[(app, where, k)].append(math.log(told / true))
        return super().decide(jobs, cluster, now)


def _policy(variant: str) -> Decider:
    if variant == "ringleader-true":
        default = policy_named("ringleader")
        assert isinstance(default, Policy)
        return replace(default, name=variant, profiling=Precompute())
    return policy_named(variant)


def one(variant: str, name: str, load: str) -> dict[str, object]:
    """One workload under one variant: its average JCT, and the model's errors."""
    jobs = bundled_jobs(name, load, adaptive=True)
    policy = _policy(variant)
    asking = None
    if variant == "ringleader":
        truth = {j.id: (j.profile.name.split("-")[0], j.profile.speed_model) for j in jobs}
        asking = Asking(policy, truth)  # type: ignore[arg-type]
    started = time.perf_counter()
    result = pollux.play(jobs, asking or policy)
    return {
        "variant": variant,
        "workload": name,
        "avg_jct_s": round(result.summary.avg_jct_s, 1),
        "wall_s": round(time.perf_counter() - started, 1),
        "errors": {}
        if asking is None
        else {"|".join(map(str, k)): v for k, v in asking.errors.items()},
    }


def _spread(logs: list[float]) -> dict[str, float]:
    ordered = sorted(logs)
    at = lambda q: round(math.exp(ordered[min(len(ordered) - 1, int(q * len(ordered)))]), 3)  # noqa: E731
    return {
        "n": len(logs),
        "median": round(math.exp(statistics.median(logs)), 3),
        "p10": at(0.1),
        "p90": at(0.9),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--load", default="1.0", choices=pollux.LOADS)
    parser.add_argument("--processes", type=int, default=None)
    parser.add_argument("--out", type=Path, default=results_file("goodput-model"))
    args = parser.parse_args()
    cells = [(v, w, args.load) for v in VARIANTS for w in workloads()]
    started = time.perf_counter()
    with ProcessPoolExecutor(args.processes) as pool:
        rows = list(pool.map(one, *zip(*cells, strict=True)))
    avg = {(r["variant"], r["workload"]): float(r["avg_jct_s"]) for r in rows}  # type: ignore[arg-type]
    table = []
    for w in workloads():
        base = avg[("pollux", w)]
        table.append(
            {"workload": w, "pollux_s": base}
            | {f"{v}_over_pollux": round(avg[(v, w)] / base, 4) for v in VARIANTS[:2]}
        )
    means = {
        v: round(statistics.fmean(float(t[f"{v}_over_pollux"]) for t in table), 4)  # type: ignore[arg-type]
        for v in VARIANTS[:2]
    }
    pooled: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        for key, logs in r["errors"].items():  # type: ignore[attr-defined]
            pooled[key].extend(logs)
    errors = {key: _spread(logs) for key, logs in sorted(pooled.items())}
    report = {
        **stamp(f"python bench/goodput_model.py --load {args.load}"),
        "load": args.load,
        "wall_s": round(time.perf_counter() - started, 1),
        "mean_over_pollux": means,
        "worst_over_pollux": {
            v: max(float(t[f"{v}_over_pollux"]) for t in table) for v in VARIANTS[:2]
        },  # type: ignore[arg-type]
        "table": table,
        "online_over_true_goodput": errors,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"{'workload':11s} {'pollux':>8s} {'default/pollux':>15s} {'with true tables':>17s}")
    for t in table:
        print(
            f"{t['workload']:11s} {t['pollux_s']:8.0f} {t['ringleader_over_pollux']:15.3f} "
            f"{t['ringleader-true_over_pollux']:17.3f}"
        )
    print("mean", means, "worst", report["worst_over_pollux"])
    print("online goodput over true (median, p10-p90), by application, seen or beyond, count:")
    for key, s in errors.items():
        print(f"  {key:24s} n={s['n']:5d} {s['median']:.2f} ({s['p10']:.2f}-{s['p90']:.2f})")


if __name__ == "__main__":
    main()
