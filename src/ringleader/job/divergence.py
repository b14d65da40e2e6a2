"""A job whose weights stop being numbers ends, saying so, rather than train on NaNs.

A learning rate scaled up with the world or the batch (``lr_rule``
``linear``) can blow a job up; from then on every step, and every
checkpoint, is wasted, and a restart from such a checkpoint is too. So
``elastic`` looks at the weights every ``CHECK_EVERY`` steps and before each
checkpoint; where one is not finite, every rank writes a ``diverged`` event
and exits non-zero, and the scheduler fails the job at once with the reason
(a retry would meet the same rate). The spec's ``on_non_finite: continue``
(``RINGLEADER_ON_NON_FINITE=continue``) lets it go on, said once in its log.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from ringleader.job.control import append_progress
from ringleader.job.damaged import MAX_WHY
from ringleader.job.ending import exit_now

ON_NON_FINITE_ENV = "RINGLEADER_ON_NON_FINITE"
CHECK_EVERY = 10
"""Steps between looks at the weights: one pass over them, one device sync."""


def finite(optimizer: Any) -> bool:
    """Whether every parameter the optimizer updates is finite."""
    import torch

    params = [p for group in optimizer.param_groups for p in group["params"]]
    if not params:
        return True
    flags = torch.stack([torch.isfinite(p.detach()).all() for p in params])
    return bool(flags.all())


class DivergenceWatch:
    """Looks at the weights now and then; ends the process where they are not finite."""

    def __init__(self, optimizer: Any, job_dir: Path, generation: int) -> None:
        self.optimizer, self.job_dir, self.generation = optimizer, job_dir, generation
        self.fail = os.environ.get(ON_NON_FINITE_ENV, "fail") != "continue"
        self._warned = False

    def check(self, step: int, how: str, *, now: bool = False) -> None:
        """At ``step``, every ``CHECK_EVERY`` steps or ``now``; ``how`` says what scaled
        the learning rate, for the reason."""
        if not (now or step % CHECK_EVERY == 0) or finite(self.optimizer):
            return
        why = (
            f"the weights are not finite at step {step} ({how}): the learning rate is too "
            "high for this batch. Lower it, or use lr_rule 'sqrt' or 'adascale'; "
            "`on_non_finite: continue` in the spec lets the job go on"
        )
        if not self.fail:
            if not self._warned:
                print(f"ringleader.elastic: {why}; going on, as the spec asks", file=sys.stderr)
                self._warned = True
            return
        # Every rank says so: whichever exits first has the rest killed.
        append_progress(
            self.job_dir,
            {"event": "diverged", "g": self.generation, "why": why[:MAX_WHY], "t": time.time()},
        )
        print(f"ringleader.elastic: {why}", file=sys.stderr, flush=True)
        exit_now(1)
