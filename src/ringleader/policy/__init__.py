"""The policy core: a pure function from a snapshot to a Plan.

No clocks, no I/O, no threads. Imports only ``ringleader.perf``.
"""

from ringleader.policy.allocator import Doubling, FixedSize, OptimusGreedy
from ringleader.policy.catalog import POLICY_NAMES, UnknownPolicyError, policy_named
from ringleader.policy.plan import Assignment, Plan
from ringleader.policy.profiling import Exploratory, PolicyInputError, Precompute
from ringleader.policy.stack import Policy
from ringleader.policy.views import ClusterView, Device, JobShape, JobView, Node, Observation

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
