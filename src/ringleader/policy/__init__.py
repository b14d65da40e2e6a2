"""The policy core: a pure function from a snapshot to a Plan.

No clocks, no I/O, no threads. Imports only ``ringleader.perf``.
"""

from ringleader.policy.catalog import POLICY_NAMES, UnknownPolicyError, policy_named
from ringleader.policy.model.plan import Assignment, Plan
from ringleader.policy.model.views import ClusterView, Device, JobShape, JobView, Node, Observation
from ringleader.policy.pipeline import Policy
from ringleader.policy.profile.sources import Exploratory, PolicyInputError, Precompute
from ringleader.policy.size.allocators import Doubling, FixedSize, OptimusGreedy

__all__ = [
    "POLICY_NAMES",
    "Assignment",
    "ClusterView",
    "Device",
    "Doubling",
    "Exploratory",
    "FixedSize",
    "JobShape",
    "JobView",
    "Node",
    "Observation",
    "OptimusGreedy",
    "Plan",
    "Policy",
    "PolicyInputError",
    "Precompute",
    "UnknownPolicyError",
    "policy_named",
]
