"""The job library: what the seeds changed inside the DL toolkits, as a library.

A training script calls it to restore-or-init from the latest good checkpoint,
to scale its learning rate with the world size it was granted, and (next) to
run a minibatch loop that reports progress and obeys the scheduler.
"""

from ringleader.job.checkpoint import CheckpointStore, CorruptCheckpoint, Restored
from ringleader.job.launch import Launch
from ringleader.job.lr import LearningRateSchedule
from ringleader.job.session import Session

__all__ = [
    "CheckpointStore",
    "CorruptCheckpoint",
    "Launch",
    "LearningRateSchedule",
    "Restored",
    "Session",
]
