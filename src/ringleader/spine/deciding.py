"""Asking the policy for a Plan: the one call both bodies make, at every event or tick.

Python's cyclic garbage collector runs when enough objects have been made,
and its oldest generation walks every object alive. A decision over 50,000
jobs makes and drops a few hundred thousand small ones (candidates, counts,
tuples), none in a cycle that refcounting does not free, so collections
fired inside it, walking the millions of objects that hold the queue,
were a third of its time (1.2 s with, 0.75 s without, at 100k GPUs). The
bodies therefore pause the collector while the policy decides; the young
objects that outlive the decision are collected at the next allocation
after it, as usual (about a tenth of the decision at that scale,
``bench/decision.py``); the simulator freezes them instead, for its run's
length (``Simulator.run``).

The switch is the process's: in the server the API's threads go without
cyclic collection for the decision's length too (reference counting still
frees what they drop). A collector someone else switched off stays off.
"""

from __future__ import annotations

import gc
from collections.abc import Sequence

from ringleader.policy.model.plan import Decider, Plan
from ringleader.policy.model.views import ClusterView, JobView


def decide(policy: Decider, views: Sequence[JobView], cluster: ClusterView, now: float) -> Plan:
    """``policy.decide(views, cluster, now)`` with cyclic garbage collection paused."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        return policy.decide(views, cluster, now)
    finally:
        if was_on:
            gc.enable()
