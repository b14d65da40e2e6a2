"""The simulated TensorLights experiment under both FIFO models, run long.

``ringleader simulate --scenario tensorlights`` simulates 200 steps and scales
them to the seed's 30,000, so the jobs' common start weighs 150 times too
much. This runs the placements the seed reports (#1..#4) with 600 steps, 4
seeds, for each FIFO model (``drain`` and ``fair``, see docs/tensorlights.md),
calibrating each on the seed's FIFO end points, and writes
bench/results/tensorlights-models.json: per model the FIFO JCTs and One/RR
normalised to FIFO, beside the seed's.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from _common import stamp
from ringleader.policy.traffic import TrafficPolicy
from ringleader.scenarios.tensorlights import PAPER, FifoModel, calibrate, mean_jct

OUT = Path(__file__).parent / "results" / "tensorlights-models.json"
STEPS = 600
SEEDS = 4
PLACEMENTS = (1, 2, 3, 4)


def main() -> None:
    report: dict[str, object] = {
        **stamp("python bench/tensorlights_models.py"),
        "steps": STEPS,
        "seeds": SEEDS,
        "placements": list(PLACEMENTS),
        "paper": {k: list(v)[: len(PLACEMENTS)] for k, v in PAPER.items()},
    }
    for model in FifoModel:
        started = time.perf_counter()
        cal = calibrate(model, steps=STEPS)
        fifo = [mean_jct(TrafficPolicy.FIFO, p, cal, SEEDS, STEPS) for p in PLACEMENTS]
        norm = {
            policy: [
                round(mean_jct(policy, p, cal, SEEDS, STEPS) / f, 3)
                for p, f in zip(PLACEMENTS, fifo, strict=True)
            ]
            for policy in (TrafficPolicy.ONE, TrafficPolicy.ROUND_ROBIN)
        }
        report[model.value] = {
            "fifo_jct_s": [round(f, 1) for f in fifo],
            "one_norm": norm[TrafficPolicy.ONE],
            "rr_norm": norm[TrafficPolicy.ROUND_ROBIN],
            "update_s": cal.update_s,
            "compute_s": cal.compute_s,
            "wall_s": round(time.perf_counter() - started, 1),
        }
        print(f"{model.value}: {report[model.value]}", file=sys.stderr, flush=True)
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
