"""Decisions at 50k jobs timed in turn for two source trees: an A/B on one machine state.

This machine's speed moves by 10-30% within an hour, and more for work that
waits on memory than for the calibration loop (docs/scale.md), so two
results files from different hours compare badly. Here each source tree
given (``--src``, a checkout's ``src/``, built or not) times the same
decisions as ``bench/decision.py``'s ``after_one_event_times`` (100k GPUs /
50k jobs, each decision one event after the last) in processes of its own,
the trees taking turns run by run (and the first tree alternating), so
both see the same hours. Instruction counts (``bench/instructions.py``) miss
what waits on memory and count numpy's fast conversions as slow; this times
what a decision costs.

Usage, against the commit before (built in a worktree beside this one)::

    git worktree add /tmp/prev HEAD~1
    PYTHONPATH=/tmp/prev/src python -c 'from ringleader.hotpath import main; main(["build"])'
    python bench/ab.py --src /tmp/prev/src --src src --policy ringleader --policy optimus

Prints, per policy and tree, the fastest and the median decision of all
runs, and each tree's median as a ratio to the first's. Writes no file: an
A/B is read beside the change it measures (quote it in the commit).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent

TIMED = """
import json, sys
sys.path.insert(0, {bench!r})
import decision
times, _ = decision.after_one_event_times(sys.argv[1], 50_000, 12_500, int(sys.argv[2]))
print(json.dumps([t * 1000 for t in times]))
"""


def timed(src: Path, policy: str, decisions: int) -> list[float]:
    """Milliseconds of ``decisions`` decisions of ``policy`` with the code under ``src``."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    code = TIMED.format(bench=str(BENCH))
    done = subprocess.run(
        [sys.executable, "-c", code, policy, str(decisions)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise SystemExit(f"{src} under {policy} failed:\n{done.stderr[-2000:]}")
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--src", action="append", type=Path, required=True, help="a source tree (twice or more)"
    )
    parser.add_argument(
        "--policy", action="append", help="a registered policy, repeatable (default: ringleader)"
    )
    parser.add_argument("--runs", type=int, default=2, help="processes per tree and policy")
    parser.add_argument("--decisions", type=int, default=9, help="decisions timed per process")
    args = parser.parse_args()
    if len(args.src) < 2:
        parser.error("--src: give two trees or more, the first the one compared against")
    for src in args.src:
        if not (src / "ringleader").is_dir():
            parser.error(f"--src {src}: no ringleader package there (give a checkout's src/)")
    policies = args.policy or ["ringleader"]
    for policy in policies:
        times: dict[Path, list[float]] = {src: [] for src in args.src}
        for run in range(args.runs):
            trees = args.src if run % 2 == 0 else args.src[::-1]
            for src in trees:
                times[src] += timed(src, policy, args.decisions)
                print(f"  {policy}: {src} run {run + 1} of {args.runs}", file=sys.stderr)
        base = statistics.median(times[args.src[0]])
        for src in args.src:
            ms = times[src]
            median = statistics.median(ms)
            print(
                f"{policy:14s} {src!s:28s} fastest {min(ms):6.1f} ms, "
                f"median {median:6.1f} ms, {median / base:.3f}x"
            )


if __name__ == "__main__":
    main()
