"""Performance models: what a job's speed and remaining work will be.

Fitted from observations, used by policies to predict and by the simulator to
play jobs forward. Pure numerics: no clocks, no I/O.
"""

from ringleader.perf.allreduce import Algorithm, AllreduceCost, allreduce_cost
from ringleader.perf.convergence import ConvergenceModel, fit_convergence
from ringleader.perf.epochs import EpochsToConverge
from ringleader.perf.errors import ModelFitError
from ringleader.perf.speed import SpeedModel, StepSample, fit_speed_model

__all__ = [
    "Algorithm",
    "AllreduceCost",
    "ConvergenceModel",
    "EpochsToConverge",
    "ModelFitError",
    "SpeedModel",
    "StepSample",
    "allreduce_cost",
    "fit_convergence",
    "fit_speed_model",
]
