"""A Trainer class holding the DDP model, a local of main(); no destroy_process_group()."""

import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


class Trainer:
    def __init__(self, model: torch.nn.Module) -> None:
        self.rank = dist.get_rank()
        self.model = DDP(model)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)

    def step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        self.optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(self.model(x), y)
        loss.backward()
        self.optimizer.step()
        return float(loss)

    def save(self, path: str) -> None:
        if self.rank == 0:
            torch.save({"model": self.model.module.state_dict()}, path)


def main(epochs: int) -> None:
    dist.init_process_group("gloo")
    trainer = Trainer(torch.nn.Linear(10, 1))
    for epoch in range(epochs):
        for _ in range(10):
            loss = trainer.step(torch.randn(8, 10), torch.randn(8, 1))
        trainer.save("snapshot.pt")
        print(f"epoch {epoch} loss {loss:.4f}", flush=True)
    with open(f"done{trainer.rank}", "w") as f:
        f.write(os.getcwd())


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
