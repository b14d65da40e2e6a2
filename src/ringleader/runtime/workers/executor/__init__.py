"""Executors: how a Plan's launches and kills reach real processes.

The controller talks to an executor only through ``Executor``; the job's
control channel (stop, suspend) is files in the job directory, the same for
every executor.
"""

from ringleader.runtime.workers.executor.base import Executor, GangStatus
from ringleader.runtime.workers.executor.local import LocalExecutor

__all__ = ["Executor", "GangStatus", "LocalExecutor"]
