"""The process group a job's ranks train in: joined, agreed over, waited on."""

from __future__ import annotations

from contextlib import AbstractContextManager

from ringleader.job.launch import Launch


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
