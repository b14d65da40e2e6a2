"""Builders for hand-made snapshots."""

from __future__ import annotations

from ringleader.perf import Algorithm, EpochsToConverge, SpeedModel
from ringleader.policy import JobShape, JobView, policy_named
from ringleader.policy.pipeline import Policy
from ringleader.sim.profiles import RESNET110_K40

SHAPE = JobShape(50_000, 128, 7e6, Algorithm.BINARY_BLOCKS)


def sized_job(
    name: str, gpus: int = 1, at: float = 0.0, elastic: bool = False, **kw: object
) -> JobView:
    """A job of ``gpus`` workers (elastic: 1..4), for tests of who runs where, not how fast."""
    fields: dict[str, object] = {
        "id": name,
        "submitted_at": at,
        "shape": JobShape(50_000, 128, 1e7),
        "epochs": EpochsToConverge.constant(10),
        "min_gpus": 1 if elastic else gpus,
        "max_gpus": 4 if elastic else gpus,
        "requested_gpus": gpus,
        "elastic": elastic,
    }
    fields.update(kw)
    return JobView(**fields)  # type: ignore[arg-type]


def default_policy() -> Policy:
    """The default ``ringleader`` policy, as the stack its stages can be read from."""
    policy = policy_named("ringleader")
    assert isinstance(policy, Policy)
    return policy


def resnet_job(job_id: str, at: float = 0.0, remaining: float = 1.0, **kw: object) -> JobView:
    p = RESNET110_K40
    fields: dict[str, object] = {
        "id": job_id,
        "submitted_at": at,
        "shape": p.shape,
        "epochs": p.epochs,
        "remaining_fraction": remaining,
        "speed": p.speed_model,
    }
    fields.update(kw)
    return JobView(**fields)  # type: ignore[arg-type]


PER_EXAMPLE_MODEL = SpeedModel(
    theta=(1e-3, 0.0, 0.0, 0.0, 0.05),
    algorithm=Algorithm.RING,
    grad_bytes=1e6,
    batch_per_worker=64,
    examples_per_epoch=50_000,
    global_batch=256,
)
"""A millisecond per example, 50 ms a step besides, and no cost to synchronise."""


def latency_bound_model() -> SpeedModel:
    """Compute = 7 message latencies: +1 worker helps up to 8, 8→9 hurts, 8→16 helps."""
    alpha = 0.01
    return SpeedModel(
        (7 * alpha / 128, alpha, 0.0, 0.0, 0.0), Algorithm.BINARY_BLOCKS, 7e6, 128, 50_000
    )


def constant_epochs(e: float = 100.0) -> EpochsToConverge:
    return EpochsToConverge.constant(e)
