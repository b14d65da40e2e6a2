"""Early feedback for hyper-parameter searches: Optuna's pruner, turned into priorities.

Gandiva's AutoML result comes from two things together: time-slicing gives
every configuration a first measurement early, and the search raises the
priority of promising configurations. ``EarlyFeedback`` is that second half,
shared by the simulated ``automl`` scenario and the real search
(``ringleader automl``): each trial's intermediate values go to Optuna's
asynchronous successive-halving pruner, and the priorities that come back are

* ``SCREEN`` (2) for a trial not yet measured at ``min_resource`` — every
  configuration gives feedback before any is exploited;
* ``PROMISING`` (1) for one the pruner keeps;
* ``PRUNED`` (0) for one it stopped: it runs only when nothing better is
  left, so a wrong cut delays a configuration rather than losing it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

SCREEN = 2
PROMISING = 1
PRUNED = 0


class MissingOptuna(RuntimeError):
    def __str__(self) -> str:
        return (
            "hyper-parameter search uses Optuna: pip install 'ringleader[automl]' (or optuna>=3.5)"
        )


def optuna_module() -> Any:
    try:
        import optuna
    except ImportError:
        raise MissingOptuna() from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


class EarlyFeedback:
    """One Optuna study whose trials are jobs; ``priorities()`` is what to tell the scheduler."""

    def __init__(
        self,
        job_ids: Iterable[str],
        *,
        direction: Literal["minimize", "maximize"],
        min_resource: int = 2,
        reduction_factor: int = 3,
    ) -> None:
        optuna = optuna_module()
        pruner = optuna.pruners.SuccessiveHalvingPruner(
            min_resource=min_resource, reduction_factor=reduction_factor
        )
        self.study = optuna.create_study(direction=direction, pruner=pruner)
        self.min_resource = min_resource
        self.trials: dict[str, Any] = {job_id: self.study.ask() for job_id in job_ids}
        self.reported: dict[str, int] = {}
        self.priority: dict[str, int] = dict.fromkeys(self.trials, SCREEN)

    def report(self, job_id: str, step: int, value: float) -> None:
        """An intermediate value of ``job_id`` at ``step`` (epochs); later steps only."""
        if step <= self.reported.get(job_id, 0) or self.priority[job_id] == PRUNED:
            return
        self.reported[job_id] = step
        trial = self.trials[job_id]
        trial.report(value, step)
        if trial.should_prune():
            self.priority[job_id] = PRUNED
        elif step >= self.min_resource:
            self.priority[job_id] = PROMISING

    def priorities(self) -> dict[str, int]:
        return dict(self.priority)
