"""ResNet-(6n+2) for CIFAR-10-shaped data (He et al. 2016): ResNet-20, -56, -110, ...

``python -m ringleader.workloads.resnet --depth 110 --epochs 160`` trains on
synthetic 3×32×32 images, 10 classes, 50,000 examples per epoch by default,
with SGD, momentum 0.9 and the linear learning-rate rule of SPEC A5 (0.1 per
128-image worker batch, ÷10 at the given epochs).
"""

from __future__ import annotations

import argparse
from typing import Any

import torch
from torch import nn

from ringleader.job import LearningRateSchedule, Session
from ringleader.workloads.data import teacher_batch


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + self.shortcut(x))


class CifarResNet(nn.Module):
    def __init__(self, depth: int = 20, classes: int = 10) -> None:
        super().__init__()
        if (depth - 2) % 6 != 0 or depth < 8:
            raise ValueError(f"depth must be 6n+2 with n >= 1 (20, 32, 56, 110...), got {depth}")
        n = (depth - 2) // 6
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16))
        layers: list[nn.Module] = []
        cin = 16
        for cout, stride in ((16, 1), (32, 2), (64, 2)):
            for i in range(n):
                layers.append(BasicBlock(cin, cout, stride if i == 0 else 1))
                cin = cout
        self.layers = nn.Sequential(*layers)
        self.head = nn.Linear(64, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.layers(torch.relu(self.stem(x)))
        logits: torch.Tensor = self.head(out.mean(dim=(2, 3)))
        return logits


def parameter_bytes(model: nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depth", type=int, default=20)
    parser.add_argument("--epochs", type=float, default=160)
    parser.add_argument("--examples-per-epoch", type=int, default=50_000)
    parser.add_argument("--batch", type=int, default=128, help="examples per worker")
    parser.add_argument("--base-lr", type=float, default=0.1)
    parser.add_argument("--decay-epochs", type=float, nargs="*", default=[])
    parser.add_argument("--checkpoint-every-s", type=float, default=30.0)
    parser.add_argument("--image-size", type=int, default=32)
    args = parser.parse_args(argv)

    torch.manual_seed(0)
    model = CifarResNet(args.depth)
    # Scale the reference lr (per 128 images) to this per-worker batch.
    schedule = LearningRateSchedule(args.base_lr * args.batch / 128, tuple(args.decay_epochs))
    optimizer = torch.optim.SGD(model.parameters(), lr=schedule.base_lr, momentum=0.9)
    session = Session.from_env(
        examples_per_epoch=args.examples_per_epoch,
        batch_per_worker=args.batch,
        epochs=args.epochs,
        lr=schedule,
        checkpoint_every_s=args.checkpoint_every_s,
        grad_bytes=float(parameter_bytes(model)),
    )
    loss_fn = nn.CrossEntropyLoss()
    shape = (3, args.image_size, args.image_size)
    with session as s:
        s.restore(model, optimizer)
        net: Any = s.distributed(model)
        net.train()
        for step in s.steps():
            s.set_lr(optimizer)
            x, y = teacher_batch(step, s.rank, args.batch, shape, 10)
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(net(x), y)
            loss.backward()
            optimizer.step()
            s.report(loss.item())


if __name__ == "__main__":
    main()
