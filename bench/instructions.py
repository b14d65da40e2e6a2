"""Instructions a simulation executes, counted by Valgrind: an A/B that noise cannot hide.

This project's machine changes speed by a third or more within an hour, and
whole runs of one build spread by 20% and more (docs/scale.md), so a change
worth 5% cannot be shown by timing runs in turn. It has no hardware counters
either (``perf stat`` reports instructions as not supported). Cachegrind counts
every instruction a process executes instead: the same run counts the same to
within 0.1%, whatever the machine is doing beside it.

Each source tree given (``--src``, a checkout's ``src/``, built or not) plays the
first ``--fraction`` of a trace's arrivals under each policy, in a process of
its own under ``valgrind --tool=cachegrind``, with the string hash fixed
(``PYTHONHASHSEED=0``) so dictionaries lay out alike. A run that only loads the
trace is counted too and taken off, so what is compared is the simulation's
own count. Two processes run at a time. An instruction is not a second (cache
misses cost more than adds), so report the times of the changed code apart, on
a quiet machine, where you can; this tells which build does less work.

Usage, against the commit before (built in a worktree beside this one)::

    git worktree add /tmp/prev HEAD~1
    PYTHONPATH=/tmp/prev/src python -c 'from ringleader.hotpath import main; main(["build"])'
    python bench/instructions.py --src /tmp/prev/src --src src --policy gandiva

Needs Valgrind (``apt-get install valgrind``); slower than the run by about 50x.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
COUNTED = re.compile(r"I\s+refs:\s+([\d,]+)")


def play(trace: str, policy: str, fraction: float) -> None:
    """The run Valgrind counts: load ``trace``, then simulate the first ``fraction`` of its
    arrivals under ``policy`` (none: only load it)."""
    sys.path.insert(0, str(HERE))
    from _common import trace_workload
    from ringleader.hotpath import in_use
    from ringleader.policy import policy_named
    from ringleader.sim import Simulator
    from ringleader.sim.contention import GavelContention

    cluster, jobs = trace_workload(trace)
    decisions = 0
    if fraction > 0:
        jobs = sorted(jobs, key=lambda j: (j.submitted_at, j.id))
        # Up to the arrival that ends the fraction; the whole trace, to its last job's end.
        until = None if fraction >= 1 else jobs[int(len(jobs) * fraction)].submitted_at
        simulator = Simulator(
            policy_named(policy), cluster, jobs, contention=GavelContention(), until=until
        )
        decisions = simulator.run().decisions
    print(f"decisions={decisions} compiled={in_use()}")


def count(src: Path, trace: str, policy: str, fraction: float) -> tuple[int, str]:
    """Instructions of one counted run with ``src`` first on the path, and what it said."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PYTHONPATH": str(src), "PYTHONHASHSEED": "0"}
        done = subprocess.run(
            [
                "valgrind",
                "--tool=cachegrind",
                "--cache-sim=no",
                f"--cachegrind-out-file={tmp}/out",
                sys.executable,
                __file__,
                "--play",
                trace,
                policy,
                str(fraction),
            ],
            capture_output=True,
            text=True,
            env=env,
        )
    found = COUNTED.search(done.stderr)
    if done.returncode != 0 or found is None:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise SystemExit(f"the counted run under {src} failed (exit {done.returncode}):\n{tail}")
    return int(found.group(1).replace(",", "")), done.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--src",
        action="append",
        type=Path,
        help="a source tree to count (a checkout's src/); give two or more to compare, "
        "the first is the base (default: this checkout's)",
    )
    parser.add_argument(
        "--policy",
        action="append",
        help="a registered policy (repeat for more; default: time-slicing and gandiva)",
    )
    parser.add_argument("--trace", default="itp:cluster07", help="a bundled trace")
    parser.add_argument(
        "--fraction",
        type=float,
        default=0.3,
        help="how much of the trace's arrivals to simulate (1: the whole trace, to the end "
        "of its last job; 0.3 of cluster07 is about 40 s a run, counted)",
    )
    parser.add_argument("--play", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.play:
        trace, policy, fraction = args.play
        play(trace, policy, float(fraction))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("needs Valgrind: apt-get install valgrind")
    if not 0 < args.fraction <= 1:
        raise SystemExit(f"--fraction: {args.fraction} is not in (0, 1]")
    sources = [s.resolve() for s in (args.src or [HERE.parent / "src"])]
    for s in sources:
        if not (s / "ringleader" / "__init__.py").is_file():
            raise SystemExit(f"--src: {s} holds no ringleader package")
    policies = args.policy or ["time-slicing", "gandiva"]
    runs = [(s, p, args.fraction) for p in policies for s in sources]
    runs += [(s, policies[0], 0.0) for s in sources]  # loading alone, taken off each
    started = time.perf_counter()
    print(f"{len(runs)} counted runs of {args.trace}, two at a time ...", flush=True)
    with ThreadPoolExecutor(2) as pool:
        counted = list(pool.map(lambda r: count(r[0], args.trace, r[1], r[2]), runs))
    by_run = {(str(s), p, f): c for (s, p, f), c in zip(runs, counted, strict=True)}
    loading = {s: by_run[(str(s), policies[0], 0.0)][0] for s in sources}
    for policy in policies:
        base: int | None = None
        for s in sources:
            total, said = by_run[(str(s), policy, args.fraction)]
            own = total - loading[s]
            base = own if base is None else base
            print(
                f"{policy:>14}  {own / 1e9:8.3f} G instructions  {own / base:6.3f}x  "
                f"({said}; loading the trace {loading[s] / 1e9:.3f} G)  {s}"
            )
    print(f"counted in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
