"""A classifier that lets ringleader pick its batch: ``ringleader.elastic`` with a spec's
``batch:`` bounds (``examples/goodput.yaml``, ``docs/goodput.md``).

    python -m ringleader.workloads.goodput --epochs 10     # alone: the batch stays fixed

Its gradient noise scale is measured as it trains and reported; at each
launch the scheduler picks each GPU's share of the batch for the most
goodput, and AdaScale scales the learning rate by what that batch is worth.
On CPU-only machines ``--compute-ms-per-example`` stands in for a GPU's
compute, so a larger share costs time as it would on one.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
from torch import nn

from ringleader import elastic


def dataset(count: int, flipped: float, seed: int = 0) -> torch.utils.data.TensorDataset:
    """Points in 32 dimensions labelled by a hidden plane, ``flipped`` of them wrongly:
    the more labels are wrong, the noisier each example's gradient."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(count, 32, generator=g)
    labels = (x @ torch.randn(32, generator=g) > 0).long()
    wrong = torch.rand(count, generator=g) < flipped
    return torch.utils.data.TensorDataset(x, torch.where(wrong, 1 - labels, labels))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10, help="epochs' worth at global_min")
    parser.add_argument("--examples", type=int, default=8192)
    parser.add_argument("--batch-size", type=int, default=32, help="per GPU, without a spec")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--lr-rule", default="adascale", help="none, linear, sqrt, adascale")
    parser.add_argument("--flipped", type=float, default=0.2, help="share of wrong labels")
    parser.add_argument("--compute-ms-per-example", type=float, default=0.0)
    parser.add_argument("--step-ms", type=float, default=0.0, help="fixed cost of a step")
    parser.add_argument("--seed", type=int, default=0, help="of the weights and the data order")
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    data = dataset(args.examples, args.flipped)
    loader = elastic.DataLoader(data, batch_size=args.batch_size, shuffle=True, seed=args.seed)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    trained = elastic.prepare(model, optimizer, lr_rule=args.lr_rule)
    loss_fn = nn.CrossEntropyLoss()
    rank = int(os.environ.get("RANK", "0"))
    for epoch in elastic.epochs(args.epochs):
        for x, y in loader:
            optimizer.zero_grad()
            loss = loss_fn(trained(x), y)
            loss.backward()
            optimizer.step()
            elastic.loss(loss)  # to its progress: the dashboard's loss chart
            time.sleep((args.step_ms + args.compute_ms_per_example * len(x)) / 1000)
        if rank == 0:
            noise = elastic.gradient_noise().noise_scale
            said = "not yet measured" if noise is None else f"{noise:.0f} examples"
            with torch.no_grad():  # the loss over every example: what a target is met on
                whole = loss_fn(model(data.tensors[0]), data.tensors[1]).item()
            print(
                f"epoch {epoch} loss {whole:.4f} noise scale {said} t {time.time():.3f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
