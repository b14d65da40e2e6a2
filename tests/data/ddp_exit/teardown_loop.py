"""DDP models freed as the function that made them returns, right after their last backward.

Each round: a one-rank gloo group, a DDP model, one backward, then
``destroy_process_group()`` and the return that frees the model. Unpatched
torch deadlocks within a few hundred rounds here, cold or warm (see
``ringleader.runtime.workers.process_groups``). Run as ``script.py ROUNDS``.
"""

import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def one_round(store: dist.Store) -> None:
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    model = DDP(torch.nn.Linear(8, 1))
    model(torch.randn(4, 8)).sum().backward()
    dist.destroy_process_group()


rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 300
for i in range(rounds):
    one_round(dist.PrefixStore(f"round{i}", dist.HashStore()))
print(f"{rounds} rounds", flush=True)
