"""A plain torchrun-style DDP script: nothing from ringleader."""

import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
local = int(os.environ["LOCAL_RANK"])
torch.manual_seed(0)
model = DDP(torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(20):
    x = torch.randn(16, 8) + rank
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
weights = model.module.weight.detach().clone()
dist.all_reduce(weights)
same = torch.allclose(weights / world, model.module.weight.detach())
restart = os.environ["TORCHELASTIC_RESTART_COUNT"]
print(f"rank {rank}/{world} local {local} restart {restart} in sync {same}", flush=True)
with open(f"done{rank}", "w") as f:
    f.write(os.getcwd())
dist.destroy_process_group()
