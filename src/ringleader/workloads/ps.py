"""A synchronous parameter-server job: one PS process, several workers.

Rank 0 is the parameter server, ranks 1..N−1 are workers (so a job with
``gpus: 5`` has one PS and four workers). Every step each worker computes the
gradient of its minibatch and sends it, with its loss, to the PS; the PS waits
for all of them (the synchronous barrier), averages, applies the update, and
sends the new model to every worker one by one — the PS→worker traffic whose
order TensorLights controls. The model is a small MLP whose size
(``--hidden``) sets how many bytes each update moves.

``python -m ringleader.workloads.ps --epochs 1 --hidden 1024``
"""

from __future__ import annotations

import argparse
import os

import torch
from torch import nn

from ringleader.job import LearningRateSchedule, Session
from ringleader.workloads.data import teacher_batch

PS_RANK = 0


def _flat(tensors: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat([t.reshape(-1) for t in tensors])


def _unflat(flat: torch.Tensor, like: list[torch.Tensor]) -> None:
    offset = 0
    for t in like:
        n = t.numel()
        t.copy_(flat[offset : offset + n].view_as(t))
        offset += n


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=float, default=1)
    parser.add_argument("--examples-per-epoch", type=int, default=8192)
    parser.add_argument("--batch", type=int, default=32, help="examples per worker")
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--base-lr", type=float, default=0.05)
    parser.add_argument("--checkpoint-every-s", type=float, default=30.0)
    args = parser.parse_args(argv)

    import torch.distributed as dist

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Flatten(), nn.Linear(3 * 8 * 8, args.hidden), nn.ReLU(), nn.Linear(args.hidden, 10)
    )
    params = list(model.parameters())
    optimizer = torch.optim.SGD(params, lr=args.base_lr, momentum=0.9)
    grad_bytes = float(sum(p.numel() * p.element_size() for p in params))
    session = Session.from_env(
        examples_per_epoch=args.examples_per_epoch,
        batch_per_worker=args.batch,
        epochs=args.epochs,
        lr=LearningRateSchedule(args.base_lr),
        checkpoint_every_s=args.checkpoint_every_s,
        grad_bytes=grad_bytes,
        data_ranks=max(1, int(os.environ.get("WORLD_SIZE", "2")) - 1),
    )
    loss_fn = nn.CrossEntropyLoss()
    with session as s:
        if s.world_size < 2:
            raise SystemExit("a parameter-server job needs at least 2 processes (PS + 1 worker)")
        workers = s.world_size - 1
        s.restore(model, optimizer)
        with torch.no_grad():  # everyone starts from the PS's model
            flat = _flat([p.data for p in params])
            dist.broadcast(flat, src=PS_RANK)
            _unflat(flat, [p.data for p in params])
        size = sum(p.numel() for p in params)
        for step in s.steps():
            if s.rank == PS_RANK:
                total = torch.zeros(size + 1)
                incoming = torch.empty(size + 1)
                for worker in range(1, s.world_size):
                    dist.recv(incoming, src=worker)
                    total += incoming
                total /= workers
                grads: list[torch.Tensor] = []
                for p in params:
                    if p.grad is None:
                        p.grad = torch.zeros_like(p)
                    grads.append(p.grad)
                _unflat(total[:size], grads)
                for group in optimizer.param_groups:
                    group["lr"] = args.base_lr * workers
                optimizer.step()
                update = _flat([p.data for p in params])
                for worker in range(1, s.world_size):
                    dist.send(update, dst=worker)
                loss_value = float(total[size])
            else:
                x, y = teacher_batch(step, s.rank, args.batch, (3, 8, 8), 10)
                model.zero_grad(set_to_none=False)
                loss = loss_fn(model(x), y)
                loss.backward()
                mine = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
                dist.send(torch.cat([_flat(mine), loss.detach().reshape(1)]), dst=PS_RANK)
                update = torch.empty(size)
                dist.recv(update, src=PS_RANK)
                with torch.no_grad():
                    _unflat(update, [p.data for p in params])
                loss_value = float(loss.item())
            s.report(loss_value)


if __name__ == "__main__":
    main()
