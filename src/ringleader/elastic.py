"""``ringleader.elastic``: a plain (DDP) training script made elastic in a few lines.

```python
from ringleader import elastic

loader = elastic.DataLoader(dataset, batch_size=64, shuffle=True)      # was DataLoader
model = elastic.prepare(model, optimizer, scheduler, lr_rule="linear")  # was DDP(model)
for epoch in elastic.epochs(10):                                        # was range(1, 11)
    for x, y in loader:
        ...
```

The script still runs as it did, under ``python`` or ``torchrun``. What the
three calls take over:

* **The process group**, from the environment torchrun and ringleader both
  set, when the world is larger than one and the script has not made it.
* **The data.** Each epoch is one seeded permutation of the dataset, split
  by minibatch across whatever world runs it. The position in the epoch is
  checkpointed in examples, so a job resumed at another size goes on with
  exactly the examples it has not seen. Each rank runs the same number of
  steps (the tail that does not fill one step of the whole world is dropped).
* **Stops and resumes.** At each minibatch boundary the job obeys ringleader
  (stop, suspend, checkpoint) or a SIGTERM (torchrun's scale events, Slurm's
  preemption): rank 0 checkpoints model, optimizer, scheduler and position,
  and every rank exits with status 0. It resumes from the job's checkpoints
  under ringleader; under torchrun only when ``TORCHELASTIC_RESTART_COUNT``
  is above 0, from ``elastic-checkpoints/<run id>`` in the working directory
  (or ``RINGLEADER_CHECKPOINT_DIR``). If every checkpoint there is damaged,
  the process exits non-zero saying so, rather than start over from step 0,
  unless ``RINGLEADER_ON_BAD_CHECKPOINT=restart`` (the spec's
  ``on_bad_checkpoint`` under ringleader); ``Session.restore`` does both.
* **The learning rate**, by the rule the script names (``lr_rule``): ``none``,
  ``linear`` or ``sqrt`` in the world size over ``base_world``, the size its
  learning rate was tuned at, or ``adascale``: AdaScale's gain, from the
  gradient noise it measured. Rank 0 prints the rule and the rates to the
  job's log at every start; nothing is scaled silently.
* **The batch, where the spec opts in** (``batch:``). Each launch says how
  many examples each rank takes (``job.batching``); the learning-rate rule
  then scales by that global batch over ``global_min``, the batch its rate
  was tuned at. A job that does not opt in keeps the loader's ``batch_size``.
  Either way, with ``measure_noise`` (on for a job that adapts) it measures
  its gradient noise as it trains (``job.noise``) and reports it with its
  progress, which is what a goodput policy sizes it by. Where a launch's
  share is more than one GPU holds, the loader yields micro-batches and the
  optimizer steps once per ``accumulate`` of them (``job.accumulate``): the
  script's loop is unchanged, and a step still counts as one.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ringleader.job import ranks
from ringleader.job.accumulate import Accumulation, mean_loss, micro_batch
from ringleader.job.batching import LaunchBatch, gain, gradient_fields
from ringleader.job.divergence import DivergenceWatch
from ringleader.job.launch import torchrun_launch, world_of
from ringleader.job.lr import lr_factor
from ringleader.job.noise import DistributedNoise, LoneNoise, NoiseScale
from ringleader.job.position import Position
from ringleader.job.session import Session

CHECKPOINT_DIR = "elastic-checkpoints"


@dataclass(slots=True)
class _Job:
    """What the three calls share in this process (one training job per process)."""

    position: Position = field(default_factory=Position)
    loader: DataLoader | None = None
    model: Any = None
    optimizer: Any = None
    scheduler: Any = None
    lr_rule: str = "none"
    base_world: int = 1
    session: Session | None = None
    own_group: bool = False
    batch: LaunchBatch | None = None
    """The batch this launch takes, where the spec opts in to an adaptive one."""
    measure_noise: bool = False
    noise: LoneNoise | DistributedNoise | None = None
    goal: float = math.inf
    """Where the batch adapts: the progress (``Position.progress``) that ends training."""
    loss: Any = None
    """The loss the script said for the micro-batch under way (``elastic.loss``)."""
    accumulation: Accumulation | None = None
    """Where this launch accumulates micro-batches: what holds the optimizer's step."""
    watch: DivergenceWatch | None = None
    scaled: str = ""
    """How the learning rate was scaled this launch, for a reason that names it."""
    worth: float = 1.0
    """Steps at ``global_min`` one step of this launch counts as. Worked out once, from
    the statistics restored with the checkpoint: every rank loads the same ones, so all
    agree on when training ends (each one's own estimate since differs a little)."""

    @property
    def rank(self) -> int:
        return world_of()[0]

    @property
    def world(self) -> int:
        return world_of()[1]


_job = _Job()


def prepare(
    model: Any,
    optimizer: Any,
    scheduler: Any = None,
    *,
    lr_rule: str,
    base_world: int = 1,
    measure_noise: bool | None = None,
) -> Any:
    """Register what a checkpoint holds and return the model to train (DDP over a world > 1).

    ``lr_rule`` (``none``, ``linear``, ``sqrt``, ``adascale``) says how the
    optimizer's learning rates, tuned at ``base_world`` workers, follow the
    world size (or, where the batch adapts, the batch). ``measure_noise``:
    whether to measure the gradient noise scale (None: where the batch adapts,
    or ``lr_rule`` is ``adascale``, which needs it).
    """
    lr_factor(lr_rule, 1, max(base_world, 1))  # a bad rule fails here, before any training
    if base_world < 1:
        raise ValueError(f"base_world must be at least 1, got {base_world}")
    _job.model, _job.optimizer, _job.scheduler = model, optimizer, scheduler
    _job.lr_rule, _job.base_world = lr_rule, base_world
    _job.batch = LaunchBatch.from_env()
    if measure_noise is None:
        measure_noise = _job.batch is not None or lr_rule == "adascale"
    _job.measure_noise = measure_noise
    world = world_of()[1]
    if world == 1:
        if measure_noise:
            _job.noise = LoneNoise(optimizer, _job.position.noise)
        return _accumulating(model)
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    if not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
        _job.own_group = True
    wrapped = DistributedDataParallel(model)
    if measure_noise:
        _job.noise = DistributedNoise(wrapped, world, _job.position.noise)
    return _accumulating(wrapped)


def _accumulating(model: Any) -> Any:
    """``model``, with the optimizer's step held between micro-batches where this launch
    accumulates them."""
    launched = _job.batch
    if launched is not None and launched.accumulate > 1 and _job.accumulation is None:
        _job.accumulation = Accumulation(_job.optimizer, model, launched.accumulate)
    return model


class DataLoader:
    """A ``torch.utils.data.DataLoader`` over this rank's share of what the epoch has left.

    Takes the arguments torch's does, except ``sampler`` and
    ``batch_sampler`` (it shards the data itself) and ``drop_last``.
    """

    def __init__(
        self,
        dataset: Any,
        batch_size: int = 1,
        shuffle: bool = False,
        *,
        seed: int = 0,
        **kwargs: Any,
    ) -> None:
        for name in ("sampler", "batch_sampler", "drop_last"):
            if name in kwargs:
                raise ValueError(f"elastic.DataLoader shards the data itself: drop {name}=")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        launched = LaunchBatch.from_env()
        self.accumulate = 1
        """Micro-batches of ``batch_size`` per optimizer step."""
        if launched is not None:  # the spec opts in: this launch's share of the batch
            batch_size, self.accumulate = launched.per_gpu, launched.accumulate
        self.dataset, self.batch_size, self.shuffle = dataset, batch_size, shuffle
        self.seed, self.kwargs = seed, kwargs
        _job.loader = self

    @property
    def share(self) -> int:
        """Examples this rank takes per optimizer step, over all its micro-batches."""
        return self.batch_size * self.accumulate

    def __len__(self) -> int:
        """Batches it yields in a whole epoch at the current world size (micro-batches,
        where they accumulate)."""
        return len(self.dataset) // (self.share * _job.world) * self.accumulate

    def steps_left(self, consumed: int, world: int) -> int:
        """Whole steps of ``world`` ranks left in an epoch of which ``consumed`` are done."""
        return max(len(self.dataset) - consumed, 0) // (self.share * world)

    def indices(self, epoch: int, consumed: int, rank: int, world: int) -> list[int]:
        """This rank's examples for the rest of ``epoch``, in the order it trains on them."""
        import torch

        count = len(self.dataset)
        if self.shuffle:
            seeded = torch.Generator().manual_seed(self.seed + epoch)
            order = torch.randperm(count, generator=seeded)
        else:
            order = torch.arange(count)
        rest = order[consumed:]
        steps = self.steps_left(consumed, world)
        mine = rest[: steps * self.share * world].view(steps, world, self.share)
        return [int(i) for i in mine[:, rank, :].reshape(-1)]

    def __iter__(self) -> Iterator[Any]:
        import torch

        session = _session()
        position = _job.position
        rank, world = _job.rank, _job.world
        mine = self.indices(position.epoch, position.consumed, rank, world)
        subset = torch.utils.data.Subset(self.dataset, mine)
        batches = torch.utils.data.DataLoader(subset, batch_size=self.batch_size, **self.kwargs)
        per_step = self.share * world
        noise, launched = _job.noise, _job.batch
        if noise is not None:
            noise.batch = self.share
        if isinstance(noise, DistributedNoise):
            noise.accumulate = self.accumulate
        said: list[Any] = []
        for index, batch in enumerate(batches):
            micro = index % self.accumulate
            if micro == 0 and session.boundary():
                session.end()  # checkpointed: every rank exits here
            with micro_batch(_job.accumulation, micro):
                yield batch
            said.append(_job.loss)
            _job.loss = None
            if micro < self.accumulate - 1:
                continue  # the step goes on: its micro-batches' gradients are summing
            position.consumed += per_step
            if isinstance(noise, DistributedNoise):
                noise.step_done()
            session.extra = gradient_fields(position.noise, per_step, launched)
            if launched is None:
                seen = position.epoch * len(self.dataset) + position.consumed
            else:
                position.progress += _job.worth * launched.global_min
                seen = int(position.progress)
            value, said = mean_loss(said), []
            session.report(value, examples_seen=seen)
            if _job.watch is not None:
                _job.watch.check(session.step, _job.scaled)
            session.checkpoint_if_due()
            if launched is not None and position.progress >= _job.goal:
                return  # trained as far as the epochs asked, counted at global_min


def epochs(count: int, start: int = 1) -> Iterator[int]:
    """Epoch numbers ``start .. start+count-1`` still to train, from where a checkpoint left off.

    ``elastic.epochs(n)`` stands for ``range(1, n + 1)``, and
    ``elastic.epochs(n, start=0)`` for ``range(n)``.
    """
    if count < 1:
        return
    session = _start(count)
    position = _job.position
    loader = _job.loader
    if (
        position.consumed
        and loader is not None
        and not loader.steps_left(position.consumed, _job.world)
    ):
        # Checkpointed after the last whole step this world can take: that epoch is
        # done. Yielding it again would run a loop body zero times, and a script that
        # reads the epoch's last loss after its loop would find none.
        position.epoch, position.consumed = position.epoch + 1, 0
    # Where the batch adapts, training ends at ``count`` epochs' worth of steps at
    # global_min (a larger batch's step is worth fewer): more passes over the data.
    adaptive = _job.batch is not None
    _job.goal = count * len(loader.dataset) if adaptive and loader is not None else math.inf
    index = position.epoch
    while (position.progress < _job.goal) if adaptive else (index < count):
        position.epoch = index
        yield start + index
        position.epoch, position.consumed = index + 1, 0
        index += 1
    session.finish()
    if _job.own_group:
        ranks.leave()
        _job.own_group = False


def loss(value: Any) -> None:
    """Say the loss of the step under way: it goes with that step's progress record (the
    dashboard's loss chart, ``ringleader show``). A tensor is read when the step ends."""
    _job.loss = value


def gradient_noise() -> NoiseScale:
    """The gradient's statistics measured so far (empty where ``measure_noise`` is off):
    ``noise_scale`` is the batch past which a larger one helps little."""
    return _job.position.noise


def _start(total: int) -> Session:
    """Make the session, restore the newest checkpoint if resuming, apply the lr rule."""
    loader = _job.loader
    if loader is None or _job.model is None:
        raise RuntimeError("call elastic.DataLoader(...) and elastic.prepare(...) before epochs()")
    launch, resume = torchrun_launch(CHECKPOINT_DIR)
    session = Session(
        launch,
        examples_per_epoch=max(len(loader.dataset), 1),
        batch_per_worker=loader.share,  # what the speed model is fitted by: the whole step's
        epochs=float(total),
    ).start()
    extra = {"position": _job.position}
    if _job.scheduler is not None:
        extra["scheduler"] = _job.scheduler
    raw = getattr(_job.model, "module", _job.model)
    session.restore(raw, _job.optimizer, resume=resume, **extra)
    _apply_lr_rule(launch.rank, launch.world_size)
    watch = _job.watch = DivergenceWatch(_job.optimizer, launch.job_dir, launch.generation)
    session.before_checkpoint = lambda: watch.check(session.step, _job.scaled, now=True)
    if _job.batch is not None:
        _job.position.noise.unit = _job.batch.global_min  # a step's weight in the averages
        _job.worth = gain(
            _job.position.noise, loader.share * launch.world_size, _job.batch.global_min
        )
    _job.session = session
    return session


def _lr_factor(world: int) -> float:
    """The rule's factor, in examples per step over those the rate was tuned at:
    ``global_min`` where the batch adapts, the loader's batch on ``base_world`` else."""
    loader, launched = _job.loader, _job.batch
    per_gpu = loader.share if loader is not None else 1
    size = per_gpu * world
    tuned = launched.global_min if launched is not None else per_gpu * _job.base_world
    if _job.lr_rule == "adascale":
        return gain(_job.position.noise, size, tuned)
    return lr_factor(_job.lr_rule, size, tuned)


def _apply_lr_rule(rank: int, world: int) -> None:
    factor = _lr_factor(world)
    change = factor / _job.position.lr_factor
    for group in _job.optimizer.param_groups:
        group["lr"] *= change
    if _job.scheduler is not None and hasattr(_job.scheduler, "base_lrs"):
        _job.scheduler.base_lrs = [lr * change for lr in _job.scheduler.base_lrs]
    _job.position.lr_factor = factor
    launched = _job.batch
    batch = "" if launched is None else f" x {launched.per_gpu} examples"
    if launched is not None and launched.accumulate > 1:
        batch += f" x {launched.accumulate} accumulated"
    _job.scaled = f"lr_rule {_job.lr_rule!r}: x{factor:g} on {world} workers{batch}"
    if rank == 0:
        rates = ", ".join(f"{g['lr']:g}" for g in _job.optimizer.param_groups)
        tuned = (
            f"{launched.global_min} examples per step"
            if launched is not None
            else f"{_job.base_world} workers"
        )
        print(
            f"ringleader.elastic: lr_rule {_job.lr_rule!r} (tuned at {tuned}): "
            f"{world} workers{batch}, learning rate x{factor:g} -> {rates}",
            flush=True,
        )


def _session() -> Session:
    if _job.session is None:
        raise RuntimeError("iterate the loader inside `for epoch in elastic.epochs(...)`")
    return _job.session
