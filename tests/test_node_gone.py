"""A node that leaves the cluster under a running job (a Slurm node that stopped
answering, a Ray node gone): the spine shows the job holding nothing, and every
policy places it on what is left."""

from __future__ import annotations

import pytest

from ringleader.policy.catalog import policy_named
from ringleader.policy.model.views import ClusterView, Device, Node
from ringleader.spine.actions import Held
from ringleader.spine.views import held_on
from tests.helpers import resnet_job

POLICIES = ["fifo", "elastic", "tiresias", "gandiva", "ringleader", "pollux", "sia"]
ON_N1_N2 = (Device("n1", 0), Device("n1", 1), Device("n2", 0), Device("n2", 1))
LEFT = ClusterView((Node("n2", 2), Node("n3", 2)))  # n1 is gone


def test_a_gang_with_a_device_on_a_gone_node_holds_nothing() -> None:
    last = (Device("n1", 0),)
    gone = held_on(Held(ON_N1_N2, False, last), LEFT.node_types)
    assert gone.devices == () and gone.last == last and not gone.suspended
    whole = Held(ON_N1_N2[2:], False, last)
    assert held_on(whole, LEFT.node_types) is whole  # all on listed nodes: as it was


@pytest.mark.parametrize("policy", POLICIES)
def test_every_policy_places_it_on_what_is_left(policy: str) -> None:
    held = held_on(Held(ON_N1_N2), LEFT.node_types)
    victim = resnet_job(
        "victim",
        elastic=True,
        min_gpus=1,
        max_gpus=4,
        requested_gpus=4,
        devices=held.devices,
        workers=len(held.devices),
    )
    placed = policy_named(policy).decide([victim], LEFT, 100.0).of("victim")
    assert placed.running and {d.node for d in placed.devices} <= {"n2", "n3"}
