"""The simulator: the policy core's plans played forward on a virtual clock."""

from ringleader.sim.engine import (
    DEFAULT_RESTART_DELAY_S,
    DEFAULT_ROUND_S,
    Simulator,
)
from ringleader.sim.errors import SimulationStalled
from ringleader.sim.host import Host, SharedCores
from ringleader.sim.profiles import PROFILES, RESNET110_K40, TrueProfile
from ringleader.sim.result import SimResult
from ringleader.sim.submitted import SimJob

__all__ = [
    "DEFAULT_RESTART_DELAY_S",
    "DEFAULT_ROUND_S",
    "PROFILES",
    "RESNET110_K40",
    "Host",
    "SharedCores",
    "SimJob",
    "SimResult",
    "SimulationStalled",
    "Simulator",
    "TrueProfile",
]
