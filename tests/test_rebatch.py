"""A running job relaunched where it runs for a better batch (``spine.batching.rebatched``).

A job that adapts its batch takes one at each launch; one launched before it
said anything of its gradient takes ``global_min`` and would keep it until a
resize. After a decision each body relaunches, on the same GPUs, the jobs
whose best batch there makes ``REBATCH_GAIN`` times the goodput of theirs and
wins their restart back. The live test is in ``test_goodput_real.py``.
"""

from __future__ import annotations

import dataclasses

from ringleader.perf.epochs import EpochsToConverge
from ringleader.perf.gradient import GradientReport
from ringleader.policy.model.plan import Assignment, Plan
from ringleader.policy.model.views import Device, JobShape, JobView, Observation
from ringleader.spine.actions import Held, Kind, Launch, Stop, Why, diff_one
from ringleader.spine.batching import REBATCH_GAIN, rebatched

GPU = (Device("n0", 0),)
NOISY = GradientReport(grad_sqr=0.001, grad_var=0.5, smallest_batch=32, largest_batch=2048)
"""A noise scale of 16,000 examples: a step of many more than 32 is worth many more."""


def _stale(**changed: object) -> JobView:
    """On one GPU at 32 a step, timed at two batches where a step is mostly fixed cost
    (20 ms, and 0.2 ms an example)."""
    seen = {1: Observation(0.0264, 30.0, 32.0), 2: Observation(0.0456, 30.0, 128.0)}
    view = JobView(
        "a",
        0.0,
        JobShape(4096, 32, 1e6),
        EpochsToConverge.constant(30),
        max_gpus=1,
        devices=GPU,
        workers=1,
        observations=seen,
        gradient=NOISY,
        restart_s=1.0,
    )
    return dataclasses.replace(view, **changed)


KEEP = Plan({"a": Assignment(GPU, 1)})


def test_a_job_at_a_batch_far_below_its_best_is_relaunched_where_it_runs() -> None:
    assert rebatched(KEEP, [_stale()], {"a"}, per_node=4) == {"a"}


def test_only_a_job_that_takes_its_batch_at_a_launch_is_relaunched() -> None:
    assert rebatched(KEEP, [_stale()], set(), per_node=4) == frozenset()


def test_a_job_the_plan_moves_or_stops_is_left_to_that_launch() -> None:
    elsewhere = Plan({"a": Assignment((Device("n0", 1),), 1)})
    assert rebatched(elsewhere, [_stale()], {"a"}, per_node=4) == frozenset()
    assert rebatched(Plan({}), [_stale()], {"a"}, per_node=4) == frozenset()


def test_no_relaunch_without_a_gradient_or_before_two_sizes_are_timed() -> None:
    assert rebatched(KEEP, [_stale(gradient=None)], {"a"}, per_node=4) == frozenset()
    one = {1: Observation(0.0264, 30.0, 32.0)}
    assert rebatched(KEEP, [_stale(observations=one)], {"a"}, per_node=4) == frozenset()


def test_no_relaunch_where_the_batch_is_near_its_best_or_the_restart_is_not_won_back() -> None:
    near = _stale(shape=JobShape(4096, 1024, 1e6))
    assert rebatched(KEEP, [near], {"a"}, per_node=4) == frozenset()
    ending = _stale(remaining_fraction=0.0005, restart_s=30.0)
    assert rebatched(KEEP, [ending], {"a"}, per_node=4) == frozenset()
    assert REBATCH_GAIN > 1


def test_a_relaunch_is_a_stop_for_a_better_batch_and_a_restart_on_the_same_gpus() -> None:
    held = Held(GPU, last=GPU)
    assert diff_one("a", held, KEEP) == []
    assert diff_one("a", held, KEEP, rebatch=True) == [
        Stop("a", Why.REBATCH),
        Launch("a", GPU, Kind.RESTART),
    ]
    suspended = Held(GPU, suspended=True, last=GPU)
    assert Stop("a", Why.REBATCH) not in diff_one("a", suspended, KEEP, rebatch=True)
