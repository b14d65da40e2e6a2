"""The minibatch loop a training script runs under ringleader.

```python
from ringleader.job import Session

with Session.from_env(examples_per_epoch=50_000, batch_per_worker=128, epochs=160) as s:
    model, opt = build()
    s.restore(model, opt)            # restore-or-init from the newest good checkpoint
    model = s.distributed(model)     # DDP over the world size the scheduler granted
    for step in s.steps():           # obeys checkpoint/stop/suspend at boundaries
        s.set_lr(opt)                # linear scaling with world size, decay by epoch
        loss = train_one_minibatch(model, opt, s.batch(step))
        s.report(loss)
```

The scheduler launches every rank with ``RINGLEADER_*`` variables plus the
usual ``RANK``/``WORLD_SIZE``/``MASTER_ADDR``/``MASTER_PORT``. Progress is
measured in examples, so a job that changes world size keeps its place in the
data: ``epoch = examples_seen / examples_per_epoch``; the global step counts
minibatches and never goes back.

With more than one worker, or after the scheduler asked the job to stop,
leaving the ``with`` block ends the process (exit status 0) after a final
barrier: put nothing after it that must run.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

from ringleader.job import ranks
from ringleader.job.checkpoint import (
    CheckpointsDamaged,
    CheckpointStore,
    on_bad_checkpoint_from_env,
)
from ringleader.job.control import (
    ACTION_CODES,
    CHECKPOINTS,
    Action,
    append_progress,
    read_control,
)
from ringleader.job.damaged import MAX_WHY, fail_damaged, warn_starting_over
from ringleader.job.ending import exit_now
from ringleader.job.launch import Launch
from ringleader.job.lr import LearningRateSchedule
from ringleader.job.offload import offload
from ringleader.job.signals import StopSignal, run_through_sigtstp
from ringleader.job.state import load_training_state, training_state

__all__ = ["MAX_WHY", "SUSPEND_POLL_S", "Session"]

_CODE_ACTIONS = {code: action for action, code in ACTION_CODES.items()}
SUSPEND_POLL_S = 0.02


class Session:
    """One launch of one job: see the module docstring."""

    def __init__(
        self,
        launch: Launch,
        *,
        examples_per_epoch: int,
        batch_per_worker: int,
        epochs: float,
        lr: LearningRateSchedule | None = None,
        checkpoint_every_s: float = 30.0,
        grad_bytes: float | None = None,
        data_ranks: int | None = None,
    ) -> None:
        self.launch = launch
        self.examples_per_epoch = examples_per_epoch
        self.batch_per_worker = batch_per_worker
        self.epochs = epochs
        self.schedule = lr or LearningRateSchedule()
        self.checkpoint_every_s = checkpoint_every_s
        self.grad_bytes = grad_bytes
        self.data_ranks = data_ranks if data_ranks is not None else launch.world_size
        """Ranks that consume a minibatch per step (all but the PS in a PS job)."""
        self.store = CheckpointStore(launch.job_dir / CHECKPOINTS)
        self.step = 0
        self.examples_seen = 0
        self.stopped = False
        self._model: Any = None
        self._optimizer: Any = None
        self._extra: dict[str, Any] = {}
        self.extra: dict[str, float] = {}
        """More to say in each step's progress record (the gradient's statistics)."""
        self.before_checkpoint: Callable[[], None] | None = None
        """Called before each checkpoint is written (``elastic`` checks the weights)."""
        self._last_checkpoint = time.monotonic()
        self._step_started = 0.0
        self._dist = False
        self._checkpoint_asked = 0
        self._control_t: float | None = None
        # Wall-clock marks of this launch, reported in the "started" event so
        # resize latency can be split into its phases (bench/resize.py).
        self._marks: dict[str, float] = {"t_session": time.time()}
        launched = os.environ.get("RINGLEADER_LAUNCH_T")
        if launched:
            self._marks["t_launch"] = float(launched)
        self._sigterm = StopSignal()
        self._sigterm.take()
        # Said at once, before the model is built: the scheduler now knows this
        # generation obeys control.json (a suspend instead of a SIGTERM stop).
        self._log({"event": "attached", "g": launch.generation, "t": time.time()})

    @classmethod
    def from_env(cls, **kw: Any) -> Session:
        return cls(Launch.from_env(), **kw)

    # -- set-up ----------------------------------------------------------
    @property
    def rank(self) -> int:
        return self.launch.rank

    @property
    def world_size(self) -> int:
        return self.launch.world_size

    @property
    def epoch(self) -> float:
        return self.examples_seen / self.examples_per_epoch

    def __enter__(self) -> Session:
        return self.start()

    def start(self) -> Session:
        """Set threads and the process group (unless the script made its own)."""
        import torch
        import torch.distributed as dist

        threads = os.environ.get("RINGLEADER_THREADS")
        if threads:
            torch.set_num_threads(int(threads))
        if self.world_size > 1 and dist.is_initialized():
            self._dist = True  # the script set up its own group (ringleader.elastic, torchrun)
        elif self.world_size > 1:
            ranks.join(self.launch, self._sigterm.ends_process())
            self._dist = True
        self._marks["t_rendezvous"] = time.time()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if kind is not None:
            return  # let the error propagate; the scheduler sees a non-zero exit
        self.end()

    def end(self) -> None:
        """After the last step or a stop: wait for every rank, then end the process if needed.

        Returns only with one worker that finished its training; otherwise the
        process exits here with status 0.
        """
        if self._dist:
            ranks.barrier()
        if self._dist or self.stopped:
            exit_now(0)  # every rank has checkpointed or finished (``ending``)

    def device(self) -> Any:
        import torch

        if self.launch.device == "cuda":
            return torch.device("cuda", 0)
        return torch.device("cpu")

    def restore(self, model: Any, optimizer: Any, *, resume: bool = True, **extra: Any) -> bool:
        """Load the newest intact checkpoint into ``model``/``optimizer``, if any.

        Returns whether one was found (False: a fresh start). ``extra`` names
        more objects with ``state_dict``/``load_state_dict`` to save and load.
        ``resume=False`` registers them for checkpoints and starts fresh.

        When checkpoints exist and every one is damaged, the process ends
        here (see ``damaged.fail_damaged``) unless the job's spec says
        ``on_bad_checkpoint: restart``; then it starts fresh, and says so.
        """
        self._model, self._optimizer, self._extra = model, optimizer, extra
        skipped: list[str] = []
        restored = None
        if resume:
            choice = on_bad_checkpoint_from_env()

            def on_skip(path: Path, why: str) -> None:
                skipped.append(why)
                self._skipped(path, why)

            try:
                restored = self.store.restore(on_skip=on_skip, on_all_damaged=choice)
            except CheckpointsDamaged as err:
                fail_damaged(self.launch.job_dir, self.launch.generation, err)
        started = {"event": "started", "g": self.launch.generation, "world_size": self.world_size}
        started |= self._marks
        if restored is None and skipped:
            warn_starting_over(self.store.directory, skipped)
        if restored is None:
            self._log(started | {"t_restored": time.time(), "restored_step": None})
            return False
        self.step, self.examples_seen = load_training_state(restored.state, model, optimizer, extra)
        restored_at = {"t_restored": time.time()}
        self._log(started | restored_at | {"restored_step": self.step, "epoch": self.epoch})
        return True

    def distributed(self, model: Any) -> Any:
        """Wrap ``model`` for data-parallel training when the world is larger than one."""
        if not self._dist:
            return model
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model)

    # -- the loop ----------------------------------------------------------
    def lr(self) -> float:
        return self.schedule.at(self.world_size, self.epoch)

    def set_lr(self, optimizer: Any) -> float:
        value = self.lr()
        for group in optimizer.param_groups:
            group["lr"] = value
        return value

    def steps(self) -> Iterator[int]:
        """Global step numbers to train, until done or told to stop."""
        while self.epoch < self.epochs:
            if self.boundary():
                return
            yield self.step
            self.checkpoint_if_due()
        self.finish()

    def boundary(self) -> bool:
        """A minibatch boundary: obey the scheduler (suspend, checkpoint, stop) here.

        Returns True when the job must stop: its checkpoint is written and
        the ``stopped`` event logged; call ``end()`` next. Every rank calls it
        at the same boundary (it agrees the action over the process group).
        """
        action = self._agreed_action()
        if action is Action.SUSPEND:
            action = self._suspended()
        if action is Action.STOP:
            began = time.time()
            self.checkpoint()
            self.stopped = True
            self._log(
                {
                    "event": "stopped",
                    "g": self.launch.generation,
                    "step": self.step,
                    "t_stop_seen": began,
                    "t": time.time(),
                }
            )
            return True
        self._step_started = time.perf_counter()
        return False

    def finish(self) -> None:
        """Training is over: the final checkpoint and the ``done`` event."""
        self.checkpoint()
        self._log({"event": "done", "g": self.launch.generation, "step": self.step})

    def report(self, loss: float | None = None, *, examples_seen: int | None = None) -> None:
        """Record one finished minibatch: advances the step and the examples seen (by one
        minibatch, or to ``examples_seen`` where the caller counts them itself)."""
        elapsed = time.perf_counter() - self._step_started
        self.step += 1
        if examples_seen is None:
            self.examples_seen += self.batch_per_worker * self.data_ranks
        else:
            self.examples_seen = examples_seen
        record = {
            "g": self.launch.generation,
            "step": self.step,
            "epoch": round(self.epoch, 6),
            "loss": None if loss is None else float(loss),
            "step_time": round(elapsed, 6),
            "world_size": self.world_size,
            "lr": self.lr(),
            "batch_per_worker": self.batch_per_worker,
            "examples_per_epoch": self.examples_per_epoch,
            "t": time.time(),
        }
        if self.grad_bytes is not None:
            record["grad_bytes"] = self.grad_bytes
        record |= self.extra
        if self.launch.device == "cuda":
            import torch

            # Peak device memory: what packing checks before it tries a pair.
            record["memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 3)
        self._log(record)

    def checkpoint_if_due(self) -> None:
        """Checkpoint when ``checkpoint_every_s`` has passed since the last one."""
        if time.monotonic() - self._last_checkpoint >= self.checkpoint_every_s:
            self.checkpoint()

    def checkpoint(self) -> None:
        """Rank 0 writes a checkpoint of the registered model and optimizer."""
        if self.before_checkpoint is not None:
            self.before_checkpoint()
        self._last_checkpoint = time.monotonic()
        if self.rank != 0 or self._model is None:
            return
        state = training_state(
            self._model, self._optimizer, self._extra, self.step, self.examples_seen
        )
        self.store.save(self.step, state)

    # -- internals ---------------------------------------------------------
    def _suspended(self) -> Action:
        """Free the device and wait at this minibatch boundary until told otherwise.

        On a GPU the model and optimizer state move to host memory and the
        allocator's cache is emptied, so another job can use the memory; on
        the CPU the process just stops computing. Polls every
        ``SUSPEND_POLL_S``, which bounds the resume latency it adds.
        """
        requested = self._control_t
        run_through_sigtstp()  # Slurm's suspend (``signals``) may follow
        self._offload("cpu")
        self._log(
            {
                "event": "suspended",
                "g": self.launch.generation,
                "step": self.step,
                "t_requested": requested,
                "t": time.time(),
            }
        )
        action = Action.SUSPEND
        while action is Action.SUSPEND:
            time.sleep(SUSPEND_POLL_S)
            action = self._agreed_action()
        requested = self._control_t
        if action is Action.RUN:
            self._offload("cuda")
            self._log(
                {
                    "event": "resumed",
                    "g": self.launch.generation,
                    "step": self.step,
                    "t_requested": requested,
                    "t": time.time(),
                }
            )
        return action

    def _offload(self, to: str) -> None:
        if self.launch.device == "cuda" and self._model is not None:
            offload(self._model, self._optimizer, to)

    def _agreed_action(self) -> Action:
        """The action every rank takes at this boundary (rank 0 decides, all follow).

        A raised checkpoint counter in the control file is honoured here too:
        the checkpoint is written before the action is returned.
        """
        code, asked = ACTION_CODES[Action.RUN], self._checkpoint_asked
        if self.rank == 0:
            control = read_control(self.launch.job_dir)
            if control is not None and control.generation == self.launch.generation:
                code, asked = ACTION_CODES[control.action], control.checkpoint
                self._control_t = control.written_at
        if self._sigterm.seen:
            code = ACTION_CODES[Action.STOP]
        if self._dist:
            code, asked = ranks.agree(code, asked)  # any rank's SIGTERM stops them all
        if asked > self._checkpoint_asked:
            self._checkpoint_asked = asked
            self.checkpoint()
            self._log({"event": "checkpointed", "g": self.launch.generation, "step": self.step})
        return _CODE_ACTIONS[code]

    def _log(self, record: dict[str, Any]) -> None:
        if self.rank == 0:
            append_progress(self.launch.job_dir, record)

    def _skipped(self, path: Path, why: str) -> None:
        self._log({"event": "checkpoint_skipped", "path": str(path), "why": why})
