"""Errors a simulation raises when its input cannot be played to the end."""


class SimulationStalled(RuntimeError):
    """Jobs are waiting, nothing runs and nothing will arrive: the run can never end."""
