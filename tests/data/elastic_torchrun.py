"""An elastic DDP script in torchrun's convention, with nothing from ringleader.

On SIGTERM it finishes the step under way, rank 0 saves a checkpoint, and all
ranks exit. When ``TORCHELASTIC_RESTART_COUNT`` is above 0 it resumes from that
checkpoint, at whatever world size it is given. Rank 0 appends one JSON line
per step to ``steps.jsonl`` (restart count, world size, step, weight) so a
test can check the job went on where it stopped.
"""

import json
import os
import signal
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 60
stopping = False


def on_term(signum: int, _frame: object) -> None:
    global stopping
    stopping = True


signal.signal(signal.SIGTERM, on_term)
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
restart = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
step = 0
if restart > 0 and os.path.exists("ckpt.pt"):
    state = torch.load("ckpt.pt")
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    step = state["step"]
ddp = DDP(model)
while step < STEPS:
    flag = torch.tensor([int(stopping)])
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)  # any rank told to stop stops all
    if flag.item():
        if rank == 0:
            state = {"model": model.state_dict(), "opt": opt.state_dict(), "step": step}
            torch.save(state, "ckpt.tmp")
            os.replace("ckpt.tmp", "ckpt.pt")
        print(f"rank {rank}: stopping at step {step}", flush=True)
        dist.barrier()
        dist.destroy_process_group()
        sys.exit(0)
    x = torch.randn(8, 4) + rank
    loss = ddp(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    step += 1
    if rank == 0:
        with open("steps.jsonl", "a") as f:
            row = {"restart": restart, "world": world, "step": step}
            f.write(json.dumps(row | {"w": model.weight.sum().item()}) + "\n")
    time.sleep(0.2)
dist.destroy_process_group()
