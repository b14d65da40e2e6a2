"""Does the simulator predict the runtime? Run a workload for real, replay it, compare.

``run_real`` runs real jobs on a local server; ``measure`` turns what the run
recorded into the simulator's terms; ``replay`` simulates the same arrivals
with those costs; ``compare`` pairs real and simulated completion times.
``ringleader fidelity`` chains them per policy (docs/fidelity.md).
"""

from ringleader.fidelity.compare import Comparison, compare, fidelity_plot
from ringleader.fidelity.measure import Measured, measure
from ringleader.fidelity.real import RealRun, RealRunError, check_unused, run_real
from ringleader.fidelity.replay import replay
from ringleader.fidelity.workload import (
    FidelityFileError,
    FidelityWorkload,
    load_fidelity_workload,
)

__all__ = [
    "Comparison",
    "FidelityFileError",
    "FidelityWorkload",
    "Measured",
    "RealRun",
    "RealRunError",
    "check_unused",
    "compare",
    "fidelity_plot",
    "load_fidelity_workload",
    "measure",
    "replay",
    "run_real",
]
