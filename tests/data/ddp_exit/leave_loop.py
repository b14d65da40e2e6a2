"""DDP models freed right after their group is left, as ``elastic.epochs`` leaves it.

Each round: a one-rank gloo group, a DDP model, one backward, then the end of
``elastic.epochs`` under torchrun (``ranks.leave``, or with ``plain`` torch's own
``barrier()`` and ``destroy_process_group()``) and the return that frees the
model. Run as ``script.py ROUNDS [plain]``.
"""

import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from ringleader.job import ranks

PLAIN = "plain" in sys.argv[2:]


def one_round(store: dist.Store) -> None:
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    model = DDP(torch.nn.Linear(8, 1))
    model(torch.randn(4, 8)).sum().backward()
    if PLAIN:
        dist.barrier()
        dist.destroy_process_group()
    else:
        ranks.leave()


rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 300
for i in range(rounds):
    one_round(dist.PrefixStore(f"round{i}", dist.HashStore()))
print(f"{rounds} rounds", flush=True)
