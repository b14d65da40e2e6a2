"""Matching a policy's needs to what a body supplies, once, at start-up.

The simulator supplies everything, truth included. The runtime cannot know a
job's true speed or remaining time; it supplies a speed model the way the
ring-allreduce seed's exploration does — each new job is measured for a short
window at two or more worker counts, then its model is refitted online from
everything it reports — and it refuses an oracle outright. ``serve_policy`` returns
the policy a body should call, or raises ``PolicyNotServed`` saying why.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ringleader.policy.model.plan import Decider
from ringleader.policy.pipeline import Policy
from ringleader.policy.profile.sources import Exploratory, Precompute

MEASURED_PROBE_SIZES = (1, 2, 4)
"""Worker counts a measured profiling phase probes (those the job allows)."""
MEASURED_WINDOW_S = 10.0
"""Seconds of minibatches measured at each probe size before the model is fitted."""


class PolicyNotServed(ValueError):
    """This body cannot run this policy; the message says why and what to use instead."""


@dataclass(frozen=True, slots=True)
class Supplies:
    """What a body can give a policy."""

    name: str
    truth: bool
    """True speed models and remaining times (only a simulator)."""
    suspend: bool = True
    packing: bool = True
    traffic: bool = False
    """A ``tc`` agent that applies the plan's traffic ranks on the host's NIC."""
    probe_window_s: float = MEASURED_WINDOW_S


SIMULATOR = Supplies("the simulator", truth=True, traffic=True)
RUNTIME = Supplies("ringleader server", truth=False)
ON_SLURM = Supplies("ringleader server --executor slurm", truth=False, suspend=False, packing=False)
"""Slurm lets no two jobs hold a GPU (GRES) at once, suspended or not."""
ON_SLURM_SHARED = Supplies(
    "ringleader server --executor slurm on an oversubscribed partition", truth=False
)
"""A partition the admin lets jobs share (``OverSubscribe=FORCE``): ringleader gives the
GPUs, no GRES, so a suspended job keeps none, and time-slicing runs; two Slurm jobs
may run on a node at once, so packing does too."""


def serve_policy(policy: Decider, body: Supplies) -> Decider:
    """``policy`` as ``body`` can run it; ``PolicyNotServed`` when it cannot."""
    needs = policy.needs
    if needs.true_remaining and not body.truth:
        raise PolicyNotServed(
            f"policy {policy.name!r} is an oracle: it ranks jobs by their true remaining "
            f"time, which only a simulator knows; {body.name} cannot run it (use it in "
            "`ringleader simulate` as a bound, or run 'tiresias' or 'ringleader' here)"
        )
    if (needs.time_slicing and not body.suspend) or (needs.packing and not body.packing):
        policy = without_sharing(policy, body)
        needs = policy.needs
    if needs.traffic and not body.traffic:
        policy = without_traffic(policy, body)
    if needs.true_model and not body.truth:
        return measured(policy, body.probe_window_s)
    return policy


def without_sharing(policy: Decider, body: Supplies) -> Decider:
    """``policy`` without its sharing stage, for a body whose GPUs one job at a time holds.

    Each job then keeps its GPUs from launch to exit, as its size and
    placement stages say; a policy that is nothing but sharing cannot run.
    """
    if isinstance(policy, Policy) and policy.share is not None:
        return replace(policy, share=None)
    raise PolicyNotServed(
        f"policy {policy.name!r} time-slices or packs jobs on a GPU; {body.name} cannot "
        "(a job there keeps its GPUs until it exits): run 'elastic', 'tiresias' or "
        "'ringleader', which runs there without its sharing stage"
    )


def without_traffic(policy: Decider, body: Supplies) -> Decider:
    """``policy`` without its traffic stage, for a body that cannot shape a NIC.

    Traffic ranks change no assignment, only the order of packets on a NIC,
    so the rest of the plan stands without them (``ringleader server`` says at
    start-up that they are off, and how to turn them on).
    """
    if isinstance(policy, Policy):
        return replace(policy, traffic=None)
    raise PolicyNotServed(f"policy {policy.name!r} sets traffic priority; {body.name} cannot")


def measured(policy: Decider, window_s: float = MEASURED_WINDOW_S) -> Decider:
    """A policy that expects speed models on arrival, fed by a measured profiling phase."""
    if isinstance(policy, Policy) and isinstance(policy.profiling, Precompute):
        return replace(policy, profiling=Exploratory(MEASURED_PROBE_SIZES, window_s))
    raise PolicyNotServed(
        f"policy {policy.name!r} needs speed models on arrival, which only a simulator's "
        "oracle has, and no profiling stage to measure them with here (use it in "
        "`ringleader simulate`, or run 'pollux' or 'ringleader' here)"
    )


def served_by_runtime(policy: Decider) -> bool:
    """Whether ``ringleader server`` can run ``policy`` (for listings)."""
    try:
        serve_policy(policy, RUNTIME)
    except PolicyNotServed:
        return False
    return True
