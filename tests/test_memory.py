"""What a policy keeps between decisions is declared, and never changes a Plan.

The written contract of every cache in ``policy/*/_incremental``: a policy that
forgets everything before each decision (``Policy.forget``) plays the same
simulation, event for event, as one that keeps it all.
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from ringleader.policy import POLICY_NAMES, ClusterView, JobView, Plan, policy_named
from ringleader.policy.catalog import with_types
from ringleader.policy.model.memory import Memory
from ringleader.policy.model.needs import Needs
from ringleader.policy.model.plan import Decider
from ringleader.scenarios import table3
from ringleader.sim import Simulator


@dataclass
class _Forgetful:
    """``policy``, made to forget what it kept before every decision."""

    policy: Decider
    forgot: int = 0

    @property
    def name(self) -> str:
        return self.policy.name

    @property
    def needs(self) -> Needs:
        return self.policy.needs

    def decide(self, jobs: Sequence[JobView], cluster: ClusterView, now: float) -> Plan:
        self.policy.forget()  # type: ignore[attr-defined]
        self.forgot += 1
        return self.policy.decide(jobs, cluster, now)


JOBS = 40
FEWER = {"sia": 6, "gavel-mmf": 20, "gavel-mmf-agnostic": 20}
"""Jobs played under the policies that solve a programme a round, which the forgetful
twin solves at every decision: 40 jobs took 42 s under ``sia``, 8 s under Gavel's."""


def _played(policy: Decider) -> tuple[object, ...]:
    jobs = table3.workload("extreme", 3)[: FEWER.get(policy.name, JOBS)]
    result = Simulator(policy, ClusterView.uniform(2, 4), jobs).run()
    return result.records, result.counts, result.decisions


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_a_policy_that_forgets_before_every_decision_plays_the_same_run(name: str) -> None:
    kept = policy_named(name)
    assert kept.memories(), f"{name} keeps nothing between decisions"  # type: ignore[attr-defined]
    forgetful = _Forgetful(policy_named(name))
    assert _played(kept) == _played(forgetful)
    assert forgetful.forgot > 10


def test_a_policy_names_each_stage_memory_and_forgets_them_all() -> None:
    policy = with_types(policy_named("ringleader"), True)
    memories = policy.memories()  # type: ignore[attr-defined]
    assert set(memories) == {"pipeline", "profiling", "size", "place"}
    jobs = table3.workload("extreme", 1)[:10]
    Simulator(policy, ClusterView.uniform(1, 8), jobs).run()
    before = {name: m.kept for name, m in memories.items()}
    policy.forget()  # type: ignore[attr-defined]
    after = {name: m.kept for name, m in policy.memories().items()}  # type: ignore[attr-defined]
    assert all(after[name] is not before[name] for name in before)


def test_memory_is_not_carried_by_a_pickled_policy() -> None:
    policy = policy_named("gandiva")
    memory = policy.memories()["gandiva"]  # type: ignore[attr-defined]
    Simulator(policy, ClusterView.uniform(1, 4), table3.workload("extreme", 1)[:10]).run()
    again = pickle.loads(pickle.dumps(memory))
    assert isinstance(again, Memory) and again.kept.groups._kept is False
    assert memory.kept.groups._kept is True
