"""Ground truth for sharing, from Gavel's measured V100 throughputs (bundled, MIT).

* Packed: each job type's steps/s beside another on one GPU, over alone
  (``ringleader.perf.interference``). Pairs measured at 0 steps/s did not fit
  together: packing them makes no progress until introspection reverts it.
  Types without measurements pack as a time-share (half speed each).
* Spread: a gang's steps/s when its GPUs are on more servers than it needs
  (Gavel's "unconsolidated" table) over consolidated. Where the measurement
  says spreading helped, we take it as noise and use 1.0; sizes not measured
  use the largest measured size below them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ringleader.perf.interference import InterferenceModel, UnknownJobType, load_interference
from ringleader.traces.jobs import gavel_table


@dataclass(frozen=True)
class GavelContention:
    gpu: str = "v100"
    model: InterferenceModel = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "model", load_interference(self.gpu))

    def packed(self, kind: str, other: str) -> float:
        try:
            return self.model.speeds(kind, other)[0]
        except UnknownJobType:
            return 0.5  # not measured: a time-share, no gain and no loss

    def spread(self, kind: str, gpus: int, extra_nodes: int) -> float:
        together = gavel_table(self.gpu)
        apart = gavel_table(f"{self.gpu}_unconsolidated")
        for size in (8, 4, 2):
            if size > gpus:
                continue
            key = f"('{kind}', {size})"
            a, b = apart.get(key), together.get(key)
            if isinstance(a, dict) and isinstance(b, dict) and float(b["null"]) > 0:
                return min(1.0, float(a["null"]) / float(b["null"]))
        return 1.0
