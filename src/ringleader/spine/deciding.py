"""Asking the policy for a Plan: the one call both bodies make, at every event or tick.

Python's cyclic garbage collector runs when enough objects have been made, and its
oldest generation walks every object alive. A decision over tens of thousands of
jobs makes and drops hundreds of thousands of small objects, none in a cycle that
reference counting does not free, yet collections fired inside it would walk the
millions of objects holding the queue (docs/scale.md, "Garbage collection"). So
the objects alive when a decision starts are frozen out of the collector's walk
for its length (``gc.freeze``) and handed back after (``gc.unfreeze``): the
collector keeps running, for the decision's own objects and for every other thread
of the process (the server's API), but never walks the heap a decision did not
make.

A body that runs nothing else in its process while it decides (the simulator,
which freezes its own run's objects between decisions: ``Simulator.run``) says
so with ``alone``: there the collector is simply paused, as a freeze would hand
the body's frozen heap back.
"""

from __future__ import annotations

import gc
from collections.abc import Sequence

from ringleader.policy.model.plan import Decider, Plan
from ringleader.policy.model.views import ClusterView, JobView


def decide(
    policy: Decider,
    views: Sequence[JobView],
    cluster: ClusterView,
    now: float,
    *,
    alone: bool = False,
) -> Plan:
    """``policy.decide(views, cluster, now)``, the heap it did not make out of the
    collector's walk meanwhile (``alone``: the collector paused instead)."""
    if alone:
        was_on = gc.isenabled()
        gc.disable()
        try:
            return policy.decide(views, cluster, now)
        finally:
            if was_on:
                gc.enable()
    gc.freeze()
    try:
        return policy.decide(views, cluster, now)
    finally:
        gc.unfreeze()
