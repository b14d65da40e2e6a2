"""A DDP training script as it is written for torchrun: nothing from ringleader.

    torchrun --standalone --nproc-per-node 2 ddp.py --epochs 4
"""

import argparse
import time

import torch
import torch.distributed as dist
from torch.utils.data import TensorDataset

from ringleader import elastic


def main() -> None:
    parser = argparse.ArgumentParser(description="linear regression with DDP")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--examples", type=int, default=2048)
    parser.add_argument("--sleep", type=float, default=0.0, help="extra seconds per step")
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    x = torch.randn(args.examples, 16)
    y = x @ torch.linspace(-1, 1, 16) + 0.1 * torch.randn(args.examples)
    dataset = TensorDataset(x, y)
    loader = elastic.DataLoader(dataset, batch_size=args.batch_size, shuffle=True)
    model = torch.nn.Linear(16, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    model = elastic.prepare(model, optimizer, lr_rule="linear")

    for epoch in elastic.epochs(args.epochs, start=0):
        for xb, yb in loader:
            loss = (model(xb).squeeze(1) - yb).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            time.sleep(args.sleep)
        if rank == 0:
            print(f"epoch {epoch} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
