"""The DDP model and its optimizer locals of main(); destroy_process_group() at its end."""

import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    layers = [torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)]
    model = DDP(torch.nn.Sequential(*layers))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(40):
        x = torch.randn(32, 16) + rank
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"rank {rank} loss {loss.item():.4f}", flush=True)
    with open(f"done{rank}", "w") as f:
        f.write(os.getcwd())
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
