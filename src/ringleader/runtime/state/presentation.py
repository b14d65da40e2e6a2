"""What the API shows of a job: a listing's summary, and the whole job with its spec.

A damaged row is shown, not hidden: with its id, state ``damaged`` and why,
under the same keys as any job's, so clients need no special case.
"""

from __future__ import annotations

import math
from typing import Any

from ringleader.runtime.state.errors import DamagedRow
from ringleader.runtime.state.rows import JobRow, gradient


def public(job: JobRow | DamagedRow) -> dict[str, Any]:
    """The whole job as the API shows it: its summary and its spec.

    ``env`` values are write-only (they hold secrets): the keys are shown,
    each value as ``null``. A damaged row has no spec to show.
    """
    if isinstance(job, DamagedRow):
        return summary(job) | {"spec": None}
    spec = job.spec.model_dump(mode="json")
    spec["env"] = dict.fromkeys(spec.get("env") or {})
    return summary(job) | {"spec": spec}


def summary(job: JobRow | DamagedRow) -> dict[str, Any]:
    """What a listing shows of a job: no spec (its command and env stay per-job)."""
    if isinstance(job, DamagedRow):
        return _damaged(job)
    return {
        "id": job.id,
        "name": job.spec.name,
        "user": job.spec.user,
        "state": job.state.value,
        "gpus": job.workers,
        "devices": [f"{n}:{i}" for n, i in job.devices],
        "step": job.step,
        "epoch": round(job.epoch, 4),
        "epochs": job.spec.epochs,
        "loss": job.loss,
        "submitted_at": job.submitted_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
        "attempts": job.attempts,
        "resizes": job.resizes,
        "counts": dict(job.counts),
        "bad_progress_lines": job.bad_lines,
        "error": job.error,
        **_batch(job),
    }


def _batch(job: JobRow) -> dict[str, Any]:
    """Where the spec lets the batch adapt: the global batch of its latest launch, and
    the gradient noise scale it last reported (examples; None before either is known)."""
    bounds = job.spec.batch
    if bounds is None:
        return {"batch": None, "noise_scale": None}
    per_gpu, workers = job.shape.get("batch_per_worker"), job.last_workers or job.workers
    batch = int(per_gpu) * workers if per_gpu and workers else None
    report = gradient(job)
    scale = None if report is None else report.noise_scale
    noise = round(scale, 1) if scale is not None and math.isfinite(scale) else None
    return {"batch": batch, "noise_scale": noise}


def _damaged(err: DamagedRow) -> dict[str, Any]:
    return {
        "id": err.job_id,
        "name": None,
        "user": None,
        "state": "damaged",
        "gpus": 0,
        "devices": [],
        "step": 0,
        "epoch": 0.0,
        "epochs": None,
        "loss": None,
        "submitted_at": None,
        "started_at": None,
        "finished_at": None,
        "attempts": 0,
        "resizes": 0,
        "counts": {},
        "bad_progress_lines": 0,
        "error": str(err),
        "batch": None,
        "noise_scale": None,
    }
