"""Errors a simulation raises when its input cannot be played to the end."""

from __future__ import annotations

from collections.abc import Iterable


class SimulationStalled(RuntimeError):
    """Jobs are waiting, nothing runs and nothing will arrive: the run can never end."""


def nothing_fits(now: float, waiting: Iterable[str], policy: str, gpus: int) -> SimulationStalled:
    """Jobs wait, and nothing runs or will arrive to change the plan."""
    names = ", ".join(sorted(waiting)[:5])
    return SimulationStalled(
        f"at t={now:.0f}s jobs {names} wait but nothing runs or arrives: "
        f"the policy {policy!r} cannot fit them on "
        f"{gpus} GPUs (check each job's GPU request)"
    )


def clock_stopped(now: float) -> SimulationStalled:
    """Time that cannot advance (remaining work below the clock's resolution at this
    magnitude of t), which would loop forever."""
    return SimulationStalled(
        f"at t={now:.6g}s simulated time stopped advancing: a job's remaining work "
        "is below the clock's resolution at this time (scale the workload's times "
        "or work up, or submit closer to t=0)"
    )
