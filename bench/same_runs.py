"""Same runs, event for event: a fingerprint of fixed-seed simulations, to keep a speed-up honest.

A change meant to make the simulator or a policy faster must not change what
any run does. This script plays fixed workloads and hashes, per run, every
job's start, finish and resize count, the counted events (starts, resizes,
migrations, suspends...) and the number of decisions, bit for bit:

* ITP cluster10 and cluster01 and Philly 2869ce under seven policies;
* Table 3's extreme load (seed 1) under four;
* Gandiva's cluster scenario (its policies, 2 seeds, with the measured
  contention model) and the heterogeneity scenario (type-aware and not);
* 60 Table 3 jobs on devices that share CPU cores (``SharedCores``, the
  fidelity replay's host model);
* the TensorLights fluid model, every FIFO model, policy and placement;
* ``sim.py``'s 10,000 Poisson jobs on 1,024 GPUs under ``precompute``, decided
  once a minute: where a score worked out in another order turned a near tie
  round once, unseen by the runs above (docs/scale.md).

``--record`` writes bench/results/same-runs.json; ``--check`` (the default)
compares with it and exits 1 naming the runs that differ. The hashes are of
floating-point results: a different CPU or libm may change them without any
change of ours, so this is a tool for a change's author on one machine, not a
test in ``make test``. Takes about a minute on the project's 2-core machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from _common import stamp, trace_workload
from ringleader.policy import ClusterView, policy_named
from ringleader.scenarios import table3
from ringleader.sim import SharedCores, SimResult, Simulator

OUT = Path(__file__).parent / "results" / "same-runs.json"
TRACE_POLICIES = (
    "fifo",
    "tiresias",
    "ringleader",
    "gandiva",
    "precompute",
    "optimus",
    "srtf-oracle",
)
TABLE3_POLICIES = ("precompute", "exploratory", "optimus", "ringleader")


def fingerprint(result: SimResult) -> str:
    """Every job's start, finish and resizes, the event counts and the decisions."""
    runs = [(r.id, r.started_at, r.finished_at, r.resizes) for r in result.records]
    text = repr(runs) + repr(sorted(result.counts.items())) + repr(result.decisions)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _digest(parts: list[str]) -> str:
    return hashlib.sha256("".join(parts).encode()).hexdigest()[:16]


def _traces() -> dict[str, str]:
    out = {}
    for name in ("itp:cluster10", "itp:cluster01", "gavel:2869ce"):
        cluster, jobs = trace_workload(name)
        for policy in TRACE_POLICIES:
            out[f"{name}/{policy}"] = fingerprint(
                Simulator(policy_named(policy), cluster, jobs).run()
            )
    return out


def _table3() -> dict[str, str]:
    cluster, jobs = table3.cluster(), table3.workload("extreme", 1)
    return {
        f"table3-extreme-1/{policy}": fingerprint(
            Simulator(policy_named(policy), cluster, jobs).run()
        )
        for policy in TABLE3_POLICIES
    }


def _scenarios() -> dict[str, str]:
    from ringleader.scenarios.gandiva import ClusterSetup, policies, run_one
    from ringleader.scenarios.heterogeneity import run_one as hetero_run

    gandiva = []
    setup = ClusterSetup(hours=2.0)
    for name in policies():
        for seed in (0, 1):
            metrics, result = run_one(setup, name, seed)
            gandiva.append(fingerprint(result) + repr(metrics))
    hetero = [
        repr(hetero_run(policy, aware, 0.6, 0))
        for policy in ("tiresias", "ringleader")
        for aware in (True, False)
    ]
    cores = []
    jobs = table3.workload("moderate", 2)[:60]
    for policy in ("precompute", "gandiva", "ringleader", "fifo"):
        sim = Simulator(
            policy_named(policy), ClusterView.uniform(2, 4), jobs, host=SharedCores(4, (0, 1))
        )
        cores.append(fingerprint(sim.run()))
    return {
        "gandiva-cluster": _digest(gandiva),
        "heterogeneity": _digest(hetero),
        "shared-cores": _digest(cores),
    }


def _tensorlights() -> dict[str, str]:
    from ringleader.policy.traffic import TrafficPolicy
    from ringleader.scenarios.tensorlights import FifoModel, calibrate, fifo_curve, simulate

    calibrated = calibrate()
    parts = [repr(calibrated), repr(fifo_curve(calibrated))]
    for fifo in FifoModel:
        model = dataclasses.replace(calibrated, fifo=fifo)
        for policy in TrafficPolicy:
            for placement in (1, 4, 8):
                parts.append(repr(simulate(policy, placement, model)))
    return {"tensorlights": _digest(parts)}


def _ticks() -> dict[str, str]:
    from sim import poisson_jobs

    sim = Simulator(
        policy_named("precompute"),
        ClusterView.uniform(128, 8),
        poisson_jobs(10_000, 128),
        tick_s=60.0,
    )
    return {"poisson-10k-tick-60/precompute": fingerprint(sim.run())}


GROUPS: tuple[Callable[[], dict[str, str]], ...] = (
    _traces,
    _table3,
    _scenarios,
    _tensorlights,
    _ticks,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="compare with the recorded file")
    mode.add_argument("--record", action="store_true", help=f"write {OUT.name} anew")
    args = parser.parse_args()
    started = time.perf_counter()
    runs: dict[str, str] = {}
    for group in GROUPS:
        runs.update(group())
        took = time.perf_counter() - started
        print(f"{group.__name__.lstrip('_')}: {len(runs)} runs, {took:.0f} s", flush=True)
    if args.record:
        OUT.parent.mkdir(exist_ok=True)
        report = {**stamp("python bench/same_runs.py --record"), "runs": runs}
        OUT.write_text(json.dumps(report, indent=2) + "\n")
        print(f"recorded {len(runs)} runs in {OUT}")
        return 0
    recorded = json.loads(OUT.read_text())["runs"]
    differ = sorted(k for k in recorded.keys() | runs.keys() if recorded.get(k) != runs.get(k))
    if differ:
        print(f"{len(differ)} of {len(recorded)} runs differ from {OUT.name}: " + ", ".join(differ))
        return 1
    print(f"all {len(runs)} runs as recorded")
    return 0


if __name__ == "__main__":
    sys.exit(main())
