"""What else kept the machine busy during a real run, beside the jobs' workers.

On the Slurm lab every node is a namespace of this one host: slurmctld,
the slurmds, munge, each job's srun and slurmstepd, the server and its
clients compete with the workers for the same cores. The run measures the
machine's busy CPU time (``/proc/stat``) and the CPU time each worker used
(its wrapper writes it when the worker ends, ``wrapper.record_exit``); the
difference, over the run's wall time, is the cores the replay leaves the
workers less of.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ringleader.job.records import read_regular

_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True, slots=True)
class MachineLoad:
    """CPU seconds over one real run's wall time."""

    wall_s: float
    busy_cpu_s: float
    """Every process's, from the machine's counters."""
    worker_cpu_s: float
    """The jobs' workers' (each rank's worker and what it waited for)."""

    @property
    def background_cores(self) -> float:
        """Cores kept busy by everything but the workers, on average over the run."""
        if self.wall_s <= 0:
            return 0.0
        return max(0.0, (self.busy_cpu_s - self.worker_cpu_s) / self.wall_s)


def busy_cpu_s(stat: Path = Path("/proc/stat")) -> float:
    """CPU seconds the machine has spent not idle since boot (all cores)."""
    fields = stat.read_text().split("\n", 1)[0].split()[1:]
    ticks = [int(v) for v in fields]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle and iowait
    return (sum(ticks[:8]) - idle) / _TICKS  # guest time is counted in user already


def workers_cpu_s(jobs_dir: Path) -> float:
    """The CPU seconds every rank's worker recorded under ``jobs_dir`` (each job's
    ``run/gen*/rank*.cpu``)."""
    total = 0.0
    for path in jobs_dir.glob("*/run/gen*/rank*.cpu"):
        raw = read_regular(path, 0, 64)
        try:
            total += max(0.0, float(raw or b""))
        except ValueError:
            continue
    return total
