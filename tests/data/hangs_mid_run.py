"""A job-library trainer one of whose ranks hangs mid-run: ``script.py STEPS HANG_AT GENERATIONS``.

Two-rank DDP on gloo, a checkpoint every 0.3 s. In each generation up to
``GENERATIONS`` (from ``RINGLEADER_GENERATION``), rank 1 stops for ever at
step ``HANG_AT`` (asleep, as a rank in a deadlock is); rank 0 then waits in
the next all-reduce. From the generation after, it trains to ``STEPS``.
"""

import os
import sys
import threading
import time

import torch

from ringleader.job import Session

steps, hang_at, hanging = (int(a) for a in sys.argv[1:4])
generation = int(os.environ["RINGLEADER_GENERATION"])
with Session.from_env(
    examples_per_epoch=steps * 8 * 2, batch_per_worker=8, epochs=1.0, checkpoint_every_s=0.3
) as s:
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    s.restore(model, opt)
    model = s.distributed(model)
    for step in s.steps():
        if generation <= hanging and s.rank == 1 and step >= hang_at:
            threading.Event().wait()
        loss = model(torch.randn(8, 4)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        s.report(loss.item())
        time.sleep(0.02)
