"""A policy of your own, from ringleader's public stages, played on a workload.

    python examples/my_policy.py [examples/two-users.yaml]

``SmallestFirst`` is a user-written order stage: jobs asking for fewer GPUs
go first (submission order among equals). Composed with the stock size and
place stages it is a whole policy; the simulator plays it like any built-in
one, beside Tiresias for comparison. See docs/policies.md.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ringleader.policy.model.objective import Candidate
from ringleader.policy.pipeline import Policy
from ringleader.policy.place.fewest_nodes import FewestNodes
from ringleader.policy.size.allocators import FixedSize
from ringleader.sim import Simulator
from ringleader.sim.workload_file import load_workload


@dataclass(frozen=True, slots=True)
class SmallestFirst:
    """Order stage: fewest requested GPUs first. Pure: reads only the candidates."""

    needs_speed: bool = False
    needs_true_remaining: bool = False

    def order(self, jobs: Sequence[Candidate], now: float) -> list[Candidate]:
        return sorted(jobs, key=lambda c: c.job.requested_gpus)  # stable: FIFO among equals


def smallest_first() -> Policy:
    return Policy(
        "smallest-first",
        size=FixedSize(None, backfill=True),  # each job its request; small ones fill holes
        order=SmallestFirst(),
        place=FewestNodes(),
    )


def main() -> None:
    from ringleader.policy import policy_named

    path = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent / "two-users.yaml")
    workload = load_workload(path)
    for policy in (smallest_first(), policy_named("tiresias")):
        result = Simulator(policy, workload.cluster, workload.jobs).run()
        print(f"{result.policy:>15}: average JCT {result.summary.avg_jct_s / 3600:.2f} h")


if __name__ == "__main__":
    main()
