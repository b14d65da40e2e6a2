"""Policies by name: what a config file, the CLI and scenarios refer to."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from ringleader.policy.allot.deciding import Allotting
from ringleader.policy.allot.max_min import MaxMinFair
from ringleader.policy.allot.sia import Sia
from ringleader.policy.gandiva.sharing import Sharing
from ringleader.policy.model.plan import Decider
from ringleader.policy.order.fairshare import FairShare
from ringleader.policy.order.finish_time import FinishTimeFair
from ringleader.policy.order.queues import LeastAttained, Prioritised, ShortestRemaining
from ringleader.policy.order.stage import Order
from ringleader.policy.pipeline import Policy
from ringleader.policy.place.fewest_nodes import FewestNodes
from ringleader.policy.place.stage import Place
from ringleader.policy.place.type_aware import TypeAware
from ringleader.policy.profile.sources import Exploratory, Online, Precompute
from ringleader.policy.share.packing import Packing
from ringleader.policy.share.timeslice import TimeSlice
from ringleader.policy.size.allocators import Doubling, FixedSize, OptimusGreedy
from ringleader.policy.size.fitness import PowerMeanSpeedup
from ringleader.policy.size.goodput import TRUST, GoodputWhereReported
from ringleader.policy.traffic import Priorities, TrafficPolicy

STARVE_AFTER_S = 7 * 86_400.0
"""The default's starvation guard: a job kept waiting a week goes ahead of every queue.

A bound, not a tuning knob: on the Philly and ITP traces a one-day guard cost up
to 4% average JCT (ITP cluster05) and helped no p99 (docs/policies.md)."""

QUEUE_THRESHOLDS_GPU_S = (36_000.0, 360_000.0)
"""The default's least-attained-service queues: under 10 GPU-hours, under 100, the rest.

A job past a threshold is served after every job below it. The second one keeps
the heavy tail of the Philly traces (jobs of hundreds of GPU-hours) from holding
GPUs that jobs of tens of hours wait for (Philly ed69ec: 114.9 h → 42.2 h average
JCT; docs/policies.md)."""

LONG_JOB_QUANTUM_S = 600.0
"""The default's time-slicing quantum in its last queue. Between 120 s and 1,800 s the
average JCT on Philly ed69ec and 0e4a51 moved by under 1%; a longer quantum means
fewer suspensions (docs/policies.md)."""

_BUILDERS: dict[str, tuple[str, Callable[[], Decider]]] = {
    "precompute": (
        "doubling heuristic, speed models known on arrival",
        lambda: Policy("precompute", Doubling(), Precompute()),
    ),
    "exploratory": (
        "doubling heuristic, each new job probed 2.5 min at 1/2/4/8 GPUs first",
        lambda: Policy("exploratory", Doubling(), Exploratory()),
    ),
    "elastic": (
        "doubling heuristic, speed models learned online from the job's own reports",
        lambda: Policy("elastic", Doubling(), Online()),
    ),
    "optimus": (
        "Optimus greedy (+1 GPU at a time), speed models known on arrival",
        lambda: Policy("optimus", OptimusGreedy(), Precompute()),
    ),
    "pollux": (
        "Pollux (OSDI'21): GPU counts maximising the harmonic mean of goodput speed-ups "
        "over a fair share, jobs picking their own batch; speed models known on arrival",
        lambda: Policy("pollux", PowerMeanSpeedup(), Precompute()),
    ),
    "pollux-shortest": (
        "ORACLE: Pollux's goodput speed-ups, spent where they end jobs soonest (the counts "
        "maximising the sum of each job's speed-up^0.5 over its remaining time), and "
        "trusted 16x past the sizes a job ran at; speed models known on arrival",
        lambda: Policy(
            "pollux-shortest",
            PowerMeanSpeedup("pollux-shortest", trust=TRUST, shortest_first=0.5),
            Precompute(),
        ),
    ),
    "ftf": (
        "ORACLE: finish-time fairness (Themis; as Gavel runs it): each job's share of time "
        "minimises the worst shared-over-isolated finish time; jobs at their requested "
        "GPUs, furthest below their share first",
        lambda: Policy("ftf", FixedSize(None, backfill=True), Precompute(), order=FinishTimeFair()),
    ),
    "sia": (
        "Sia (SOSP'23): each round an ILP picks every job's GPU type and count by "
        "goodput speed-ups (p = -0.5), restarts discounted; speed models known on arrival",
        lambda: Allotting("sia", Sia()),
    ),
    "gavel-mmf": (
        "Gavel (OSDI'20) max-min fairness: an LP over each job's time on each GPU type "
        "at its requested GPUs, weighing its speed there; 6-minute rounds",
        lambda: Allotting("gavel-mmf", MaxMinFair()),
    ),
    "gavel-mmf-agnostic": (
        "Gavel's max-min fairness blind to GPU types: equal time on any type",
        lambda: Allotting("gavel-mmf-agnostic", MaxMinFair(aware=False)),
    ),
    "fifo": (
        "every job gets exactly the GPUs it requests, first come first served",
        lambda: Policy("fifo", FixedSize(None)),
    ),
    "ringleader": (
        "fair share between users, then priority, then least-attained-service queues "
        "(10 and 100 GPU-hours; a job waiting a week goes first) pick who runs; doubling "
        "picks how wide (jobs that adapt their batch: goodput speed-ups over remaining "
        "time, from the gradients they report, and on mixed GPU types the type with the "
        "count); jobs past 100 GPU-hours take turns in 10-minute "
        "quanta when GPUs are short, two on one GPU where measured to beat turns; parameter "
        "servers "
        "sharing a host send in that order; models "
        "learned online; no durations",
        lambda: Policy(
            "ringleader",
            GoodputWhereReported(Doubling(backfill=True, per_epoch=True)),
            Online(),
            order=FairShare(
                Prioritised(LeastAttained(QUEUE_THRESHOLDS_GPU_S, starve_after_s=STARVE_AFTER_S))
            ),
            share=TimeSlice(
                LONG_JOB_QUANTUM_S, after_gpu_s=QUEUE_THRESHOLDS_GPU_S[-1], packing=Packing()
            ),
            traffic=Priorities(TrafficPolicy.ONE),
            place=FewestNodes(one_node_first=True),
        ),
    ),
    "tiresias": (
        "Tiresias: discretised 2D least-attained-service queues, preemptive, no durations",
        lambda: Policy("tiresias", FixedSize(None, backfill=True), order=LeastAttained()),
    ),
    "srtf-oracle": (
        "ORACLE: shortest true remaining time first, preemptive (a bound, not a scheduler)",
        lambda: Policy(
            "srtf-oracle", FixedSize(None, backfill=True), Precompute(), order=ShortestRemaining()
        ),
    ),
    "gandiva": (
        "Gandiva: time-slicing in 60 s quanta, packing kept only if it helps, migration, "
        "grow-shrink, priorities",
        lambda: Sharing("gandiva"),
    ),
    "time-slicing": (
        "Gandiva without packing: time-slicing, migration, grow-shrink, priorities",
        lambda: Sharing("time-slicing", packing=False),
    ),
    "no-sharing": (
        "exclusive GPUs, first come first served with backfill (Gandiva's baseline)",
        lambda: Sharing(
            "no-sharing", time_slicing=False, packing=False, migration=False, grow_shrink=False
        ),
    ),
    "one": ("every job runs on 1 GPU, FIFO", lambda: Policy("one", FixedSize(1))),
    "two": ("every job runs on 2 GPUs, FIFO", lambda: Policy("two", FixedSize(2))),
    "four": ("every job runs on 4 GPUs, FIFO", lambda: Policy("four", FixedSize(4))),
    "eight": ("every job runs on 8 GPUs, FIFO", lambda: Policy("eight", FixedSize(8))),
}


class UnknownPolicyError(KeyError):
    def __str__(self) -> str:
        return f"unknown policy {self.args[0]!r}; choose one of: {', '.join(POLICY_NAMES)}"


POLICY_NAMES: tuple[str, ...] = tuple(_BUILDERS)


def describe(name: str) -> str:
    return _BUILDERS[name][0]


class SettingNotUsed(ValueError):
    """A setting given for a policy that has no such knob; says which and who has it."""


def policy_from_config(
    name: str,
    probe_window_s: float | None = None,
    quantum_s: float | None = None,
    thresholds_gpu_s: tuple[float, ...] | None = None,
    *,
    user_weights: Mapping[str, float] | None = None,
    strict: bool = False,
) -> Decider:
    """A named policy, with the exploratory probe window, the sharing quantum or the
    least-attained-service queue thresholds overridden, and fair share's user
    weights set. ``strict``: a setting the policy has no use for is an error
    (``SettingNotUsed``), not ignored."""
    policy = policy_named(name)
    if user_weights:
        if isinstance(policy, Policy) and isinstance(policy.order, FairShare):
            weights = tuple(sorted(user_weights.items()))
            policy = replace(policy, order=replace(policy.order, weights=weights))
        elif strict:
            raise SettingNotUsed(
                f"policy {name!r} has no fair share between users (ringleader does)"
            )
    if thresholds_gpu_s is not None:
        order = (
            _with_queues(policy.order, thresholds_gpu_s=thresholds_gpu_s)
            if isinstance(policy, Policy)
            else None
        )
        if isinstance(policy, Policy) and order is not None:
            policy = replace(policy, order=order)
            if isinstance(policy.share, TimeSlice):  # the last queue takes turns
                last = max(thresholds_gpu_s, default=0.0)
                policy = replace(policy, share=replace(policy.share, after_gpu_s=last))
        elif strict:
            raise SettingNotUsed(
                f"policy {name!r} has no attained-service queues (tiresias and ringleader do)"
            )
    if quantum_s is not None:
        if isinstance(policy, Sharing):
            return replace(policy, quantum_s=quantum_s, trial_window_s=0.75 * quantum_s)
        if isinstance(policy, Policy) and isinstance(policy.share, TimeSlice):
            policy = replace(policy, share=replace(policy.share, quantum_s=quantum_s))
        elif strict:
            raise SettingNotUsed(
                f"policy {name!r} does not time-slice (gandiva, time-slicing and ringleader do)"
            )
    if (
        probe_window_s is not None
        and isinstance(policy, Policy)
        and isinstance(policy.profiling, Exploratory)
    ):
        profiling = Exploratory(policy.profiling.probe_sizes, probe_window_s)
        return replace(policy, profiling=profiling)
    return policy


def _with_queues(order: Order, **changes: Any) -> Order | None:
    """``order`` with ``changes`` made to its least-attained-service queues (its
    ``LeastAttained`` stage, however deeply wrapped); None: it has none."""
    if isinstance(order, LeastAttained):
        return replace(order, **changes)
    if isinstance(order, FairShare | Prioritised):
        inner = _with_queues(order.within, **changes)
        return None if inner is None else replace(order, within=inner)
    return None


def policy_named(name: str) -> Decider:
    """The policy registered under ``name``; raises ``UnknownPolicyError`` otherwise.

    Every composed policy places with the type-aware stage (``TypeAware``), which
    on a cluster of one GPU type places exactly as ``FewestNodes``;
    ``with_types(policy, False)`` is its type-agnostic variant."""
    try:
        policy = _BUILDERS[name][1]()
    except KeyError:
        raise UnknownPolicyError(name) from None
    return with_types(policy, True) if isinstance(policy, Policy) else policy


AGNOSTIC_SUFFIX = "-agnostic"


def has_type_variant(policy: Decider) -> bool:
    """Whether ``with_types`` can turn ``policy`` blind to GPU types: a composed policy,
    or Gavel's max-min fairness; ``gandiva`` and ``sia`` decide types their own way."""
    return isinstance(policy, Policy) or (
        isinstance(policy, Allotting) and isinstance(policy.allot, MaxMinFair)
    )


def with_types(policy: Decider, aware: bool) -> Decider:
    """``policy`` placing by GPU type (``TypeAware``) and counting least-attained service
    in each job's best type's terms, or blind to types (``FewestNodes``, GPU-seconds;
    named ``NAME-agnostic``). Gavel's max-min fairness turns to its agnostic twin or back;
    another policy with no place stage (``gandiva``, ``sia``) is returned as is."""
    if isinstance(policy, Allotting) and isinstance(policy.allot, MaxMinFair):
        allot = replace(policy.allot, aware=aware)
        return replace(policy, name=allot.name, allot=allot)
    if not isinstance(policy, Policy):
        return policy
    base = policy.name.removesuffix(AGNOSTIC_SUFFIX)
    order = _with_queues(policy.order, effective=aware) or policy.order
    share = policy.share
    if isinstance(share, TimeSlice):
        share = replace(share, effective=aware)
    first = getattr(policy.place, "one_node_first", False)
    if aware:
        place: Place = TypeAware(one_node_first=first)
        return replace(policy, name=base, place=place, order=order, share=share)
    place = FewestNodes(one_node_first=first)
    return replace(policy, name=base + AGNOSTIC_SUFFIX, place=place, order=order, share=share)
