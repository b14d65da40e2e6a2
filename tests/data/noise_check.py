"""Train a small classifier through ``ringleader.elastic`` with the noise measured, then
compare the online noise scale with one computed offline from per-example gradients.

Run under torchrun (or plain python for one replica); rank 0 prints one line
``noise online=<B> offline=<B>``. The learning rate is small so the weights,
and with them the true noise scale, barely move while the online one settles.
"""

from __future__ import annotations

import argparse
import os

import torch
from torch import nn

from ringleader import elastic


def data(count: int, seed: int = 0) -> torch.utils.data.TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(count, 20, generator=g)
    w = torch.randn(20, generator=g)
    labels = ((x @ w + 1.5 * torch.randn(count, generator=g)) > 0).long()
    return torch.utils.data.TensorDataset(x, labels)


def offline(model: nn.Module, dataset: torch.utils.data.TensorDataset) -> float:
    """``tr Σ / |G|²`` from every example's own gradient at the model's weights."""
    loss_fn = nn.CrossEntropyLoss()
    per_example = []
    for x, y in zip(*dataset.tensors, strict=True):
        model.zero_grad()
        loss_fn(model(x[None]), y[None]).backward()
        per_example.append(torch.cat([p.grad.flatten() for p in model.parameters()]).double())
    grads = torch.stack(per_example)
    mean = grads.mean(0)
    trace = float(((grads - mean) ** 2).sum(1).mean())
    return trace / float(mean.pow(2).sum())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--examples", type=int, default=4096)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(0)
    dataset = data(args.examples)
    model = nn.Linear(20, 2)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    loader = elastic.DataLoader(dataset, batch_size=args.batch, shuffle=True)
    trained = elastic.prepare(model, opt, lr_rule="none", measure_noise=True)
    loss_fn = nn.CrossEntropyLoss()
    for _ in elastic.epochs(args.epochs):
        for x, y in loader:
            opt.zero_grad()
            loss_fn(trained(x), y).backward()
            opt.step()
        noise = elastic.gradient_noise().noise_scale
    if os.environ.get("RANK", "0") != "0":
        return
    print(f"noise online={noise:.4f} offline={offline(model, dataset):.4f}", flush=True)


if __name__ == "__main__":
    main()
