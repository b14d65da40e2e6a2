"""A small decoder-only transformer language model on synthetic bigram text.

``python -m ringleader.workloads.transformer --epochs 1`` trains a 2-layer,
128-wide causal transformer on sequences from a fixed random bigram table.
"""

from __future__ import annotations

import argparse
from typing import Any

import torch
from torch import nn

from ringleader.job import LearningRateSchedule, Session
from ringleader.workloads.data import token_batch


class TinyLM(nn.Module):
    def __init__(self, vocab: int, width: int, layers: int, heads: int, length: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.position = nn.Parameter(torch.zeros(length, width))
        block = nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0, batch_first=True)
        self.blocks = nn.TransformerEncoder(block, layers)
        self.out = nn.Linear(width, vocab)
        self.mask: torch.Tensor
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(length))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        n = tokens.shape[1]
        h = self.embed(tokens) + self.position[:n]
        logits: torch.Tensor = self.out(self.blocks(h, mask=self.mask[:n, :n], is_causal=True))
        return logits


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=float, default=1)
    parser.add_argument("--examples-per-epoch", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=64)
    parser.add_argument("--vocab", type=int, default=256)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--base-lr", type=float, default=1e-3)
    parser.add_argument("--checkpoint-every-s", type=float, default=30.0)
    args = parser.parse_args(argv)

    torch.manual_seed(0)
    model = TinyLM(args.vocab, args.width, args.layers, 4, args.length)
    schedule = LearningRateSchedule(args.base_lr)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.base_lr)
    grad_bytes = float(sum(p.numel() * p.element_size() for p in model.parameters()))
    session = Session.from_env(
        examples_per_epoch=args.examples_per_epoch,
        batch_per_worker=args.batch,
        epochs=args.epochs,
        lr=schedule,
        checkpoint_every_s=args.checkpoint_every_s,
        grad_bytes=grad_bytes,
    )
    loss_fn = nn.CrossEntropyLoss()
    with session as s:
        s.restore(model, optimizer)
        net: Any = s.distributed(model)
        for step in s.steps():
            s.set_lr(optimizer)
            tokens = token_batch(step, s.rank, args.batch, args.length + 1, args.vocab)
            optimizer.zero_grad(set_to_none=True)
            logits = net(tokens[:, :-1])
            loss = loss_fn(logits.reshape(-1, args.vocab), tokens[:, 1:].reshape(-1))
            loss.backward()
            optimizer.step()
            s.report(loss.item())


if __name__ == "__main__":
    main()
