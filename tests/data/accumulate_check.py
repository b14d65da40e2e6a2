"""Train a tiny model through ``ringleader.elastic`` for a few optimizer steps at the
batch ``RINGLEADER_BATCH`` says, then print its weights: a step of ``accumulate``
micro-batches must leave the same ones as a step of the whole batch at once.

Run under torchrun (or plain python for one replica); rank 0 prints one line
``result {json}``: the weights, the steps the session counted, the allreduces
each micro-batch's body made (the DDP comm hook's), the lr rule's line and the
gradient statistics measured (which must be the whole step's either way).
The script is a plain port: ``zero_grad``, ``backward``, ``step`` per batch
(``--zero-grad after`` puts ``zero_grad`` after the step instead).
"""

from __future__ import annotations

import argparse
import json
import os

import torch
from torch import nn

from ringleader import elastic
from ringleader.elastic import _job


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--examples", type=int, default=64)
    parser.add_argument("--zero-grad", choices=("before", "after"), default="before")
    args = parser.parse_args()
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(args.examples, 8, generator=g)
    y = torch.randn(args.examples, 1, generator=g)
    dataset = torch.utils.data.TensorDataset(x, y)
    model = nn.Sequential(nn.Linear(8, 4), nn.Tanh(), nn.Linear(4, 1)).double()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loader = elastic.DataLoader(dataset, batch_size=1, shuffle=True)
    trained = elastic.prepare(model, opt, lr_rule="none")
    reduces = [0]
    if torch.distributed.is_initialized():  # count the comm hook's allreduces
        plain = torch.distributed.all_reduce

        def counted(*a: object, **k: object) -> object:
            reduces[0] += 1
            return plain(*a, **k)  # type: ignore[arg-type]

        torch.distributed.all_reduce = counted  # type: ignore[assignment]
    per_micro: list[int] = []
    loss_fn = nn.MSELoss()
    for _ in elastic.epochs(1):
        for xb, yb in loader:
            before = reduces[0]
            if args.zero_grad == "before":
                opt.zero_grad()
            loss = loss_fn(trained(xb.double()), yb.double())
            loss.backward()
            opt.step()
            if args.zero_grad == "after":
                opt.zero_grad()
            elastic.loss(loss)
            per_micro.append(reduces[0] - before)
    if os.environ.get("RANK", "0") != "0":
        return
    assert _job.session is not None
    weights = [p.detach().flatten().tolist() for p in model.parameters()]
    said = {"weights": weights, "steps": _job.session.step, "reduces": per_micro}
    noise = elastic.gradient_noise()
    said |= {"micro_batches": len(per_micro), "scaled": _job.scaled}
    said |= {"noise": [noise.grad_sqr, noise.trace_var]}
    print("result " + json.dumps(said), flush=True)


if __name__ == "__main__":
    main()
