"""The process group a job's ranks train in: joined, agreed over, waited on."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from ringleader.job.launch import Launch

_kept: list[Any] = []
"""The last barrier's work and the groups ``leave`` destroyed, held to the end of the
process.

Gloo's worker thread drops its reference to a work once the work is done,
and where that is the last one the work is destroyed there, which needs the
GIL (its thread-local state holds Python objects). A rank that returns right
after the barrier and frees its DDP model tears the process group down from
the main thread, GIL held (DDP's Reducer held the group's last reference),
and joins that worker: both wait for ever (seen with torch 2.13 under
torchrun, rank 1 stuck in ``~ProcessGroupGloo``; a warm worker's copy of the
same hang: ``runtime.workers.process_groups``). Held here, neither is freed
while a work may be.
"""


def join(launch: Launch, meeting: AbstractContextManager[None]) -> None:
    """Join the job's process group (NCCL on CUDA, else gloo), inside ``meeting``."""
    import torch.distributed as dist

    backend = "nccl" if launch.device == "cuda" else "gloo"
    with meeting:
        dist.init_process_group(
            backend,
            init_method=f"tcp://{launch.master_addr}:{launch.master_port}",
            rank=launch.rank,
            world_size=launch.world_size,
        )


def agree(code: int, asked: int) -> tuple[int, int]:
    """The highest action code and checkpoint counter of any rank.

    Any rank that was sent SIGTERM stops them all: the highest code wins
    (RUN < SUSPEND < STOP), and the checkpoint counter is rank 0's.
    """
    import torch
    import torch.distributed as dist

    message = torch.tensor([code, asked], dtype=torch.int64)
    dist.all_reduce(message, op=dist.ReduceOp.MAX)
    return int(message[0].item()), int(message[1].item())


def barrier() -> None:
    """Wait for every rank."""
    import torch.distributed as dist

    work = dist.barrier(async_op=True)
    if work is not None:
        work.wait()
        _kept.append(work)  # not destroyed on gloo's thread (see ``_kept``)


def leave() -> None:
    """Wait for every rank, then destroy the default process group, keeping it (and the
    barrier's work) alive to the end of the process: see ``_kept``."""
    import torch.distributed as dist

    barrier()
    _kept.append(dist.group.WORLD)
    dist.destroy_process_group()
