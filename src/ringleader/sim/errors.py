"""Errors a simulation raises when its input cannot be played to the end."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ringleader.sim.submitted import SimJob


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


def check_quotas(jobs: Iterable[SimJob], quotas: Mapping[str, int]) -> None:
    """Raise ``ValueError`` for a job whose user's quota is below its least GPUs: it
    could never run."""
    for j in jobs if quotas else ():
        if quotas.get(j.user, j.min_gpus) < j.min_gpus:
            raise ValueError(
                f"job {j.id} needs at least {j.min_gpus} GPUs but its user {j.user!r} "
                f"may use only {quotas[j.user]} (quota): it could never run"
            )
