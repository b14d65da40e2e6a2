"""TensorLights: the policy stage (pure), the tc agent and netlab in real namespaces."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest

from ringleader.net.agent import TrafficAgent
from ringleader.net.tc import NetCommandError, have_net_admin, run
from ringleader.policy.traffic import TrafficPolicy, traffic_priorities

CAN, WHY = have_net_admin()
needs_net_admin = pytest.mark.skipif(not CAN, reason=f"netlab tests: {WHY}")


def test_fifo_has_no_priorities() -> None:
    assert traffic_priorities(["a", "b"], TrafficPolicy.FIFO, 100.0) == {}


def test_one_is_a_fixed_order() -> None:
    for now in (0.0, 55.0, 1e6):
        assert traffic_priorities(["a", "b", "c"], TrafficPolicy.ONE, now) == {
            "a": 0,
            "b": 1,
            "c": 2,
        }


def test_round_robin_rotates_every_interval() -> None:
    jobs = ["a", "b", "c"]
    first = traffic_priorities(jobs, TrafficPolicy.ROUND_ROBIN, 5.0, 20.0)
    second = traffic_priorities(jobs, TrafficPolicy.ROUND_ROBIN, 25.0, 20.0)
    third = traffic_priorities(jobs, TrafficPolicy.ROUND_ROBIN, 45.0, 20.0)
    assert first == {"a": 0, "b": 1, "c": 2}
    assert second == {"a": 2, "b": 0, "c": 1}
    assert third == {"a": 1, "b": 2, "c": 0}
    assert traffic_priorities(jobs, TrafficPolicy.ROUND_ROBIN, 65.0, 20.0) == first


@pytest.fixture
def netns() -> Iterator[str]:
    name = f"rltest{os.getpid() % 100000}"
    run(["ip", "netns", "add", name])
    try:
        run(["ip", "-n", name, "link", "add", "eth0", "type", "veth", "peer", "name", "eth1"])
        run(["ip", "-n", name, "link", "set", "eth0", "up"])
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


@needs_net_admin
def test_agent_installs_once_repoints_filters_and_removes_everything(netns: str) -> None:
    agent = TrafficAgent("eth0", 100, netns=netns)
    agent.install()
    agent.install()  # idempotent
    qdiscs = run(["tc", "qdisc", "show", "dev", "eth0"], netns=netns)
    assert qdiscs.count("qdisc htb 1: root") == 1
    agent.apply({5001: 0, 5002: 1})
    assert agent.filters() == {5001: "1:10", 5002: "1:11"}
    before = run(["tc", "-s", "qdisc", "show", "dev", "eth0"], netns=netns)
    agent.apply({5001: 1, 5002: 0})  # a rotation: filters move, the tree stays
    assert agent.filters() == {5001: "1:11", 5002: "1:10"}
    after = run(["tc", "-s", "qdisc", "show", "dev", "eth0"], netns=netns)
    assert before.splitlines()[0].split()[:3] == after.splitlines()[0].split()[:3]
    agent.apply({5002: 0, 5003: 1})  # 5001 leaves while 5002 stays: no live handle reused
    assert agent.filters() == {5002: "1:10", 5003: "1:11"}
    agent.apply({5001: 0, 5002: 1, 5003: 2})
    assert agent.filters() == {5001: "1:10", 5002: "1:11", 5003: "1:12"}
    agent.apply({5001: 9})  # beyond htb's 8 levels: the lowest class
    assert agent.filters() == {5001: "1:17"}
    agent.remove()
    assert "htb" not in run(["tc", "qdisc", "show", "dev", "eth0"], netns=netns)


@needs_net_admin
def test_agent_refuses_to_take_over_someone_elses_tree(netns: str) -> None:
    run(["tc", "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb"], netns=netns)
    with pytest.raises(NetCommandError, match="did not create"):
        TrafficAgent("eth0", 100, netns=netns).install()
    # and a fresh agent after a crash recognises (and removes) its own tree
    run(["tc", "qdisc", "del", "dev", "eth0", "root"], netns=netns)
    TrafficAgent("eth0", 100, netns=netns).install()
    survivor = TrafficAgent("eth0", 100, netns=netns)
    assert survivor.installed()
    survivor.remove()
    assert not survivor.installed()


def _leftovers(prefix: str) -> list[str]:
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    procs = subprocess.run(
        ["pgrep", "-f", "ringleader.net.emulator"], capture_output=True, text=True
    ).stdout
    return [n for n in namespaces.split() if n.startswith(prefix)] + procs.split()


@needs_net_admin
@pytest.mark.slow
def test_netlab_one_beats_fifo_when_parameter_servers_share_a_host() -> None:
    from ringleader.net.netlab import Lab, NetlabConfig, run_once

    prefix = Lab(NetlabConfig(TrafficPolicy.FIFO)).prefix
    fifo = run_once(NetlabConfig(TrafficPolicy.FIFO, steps=20))
    one = run_once(NetlabConfig(TrafficPolicy.ONE, steps=20))
    assert one.avg_jct_s < 0.95 * fifo.avg_jct_s, (one, fifo)
    assert min(one.jct_s) < min(fifo.jct_s)  # the first-ranked job runs almost alone
    assert _leftovers(prefix) == []


@needs_net_admin
@pytest.mark.slow
def test_netlab_leaves_nothing_behind_when_a_run_fails() -> None:
    from ringleader.net.netlab import Lab, NetlabConfig, run_once

    prefix = Lab(NetlabConfig(TrafficPolicy.FIFO)).prefix
    with pytest.raises(TimeoutError):
        run_once(NetlabConfig(TrafficPolicy.ONE, steps=10_000), timeout_s=3)
    assert _leftovers(prefix) == []


def test_simulated_fifo_curve_falls_and_uniform_is_neutral() -> None:
    from ringleader.scenarios.tensorlights import (
        HOSTS_PER_PLACEMENT,
        PAPER,
        calibrate,
        fifo_curve,
        simulate,
    )

    cal = calibrate()
    curve = fifo_curve(cal)
    assert curve == sorted(curve, reverse=True)
    assert curve[0] == pytest.approx(PAPER["fifo_jct_s"][0], rel=0.02)
    assert curve[-1] == pytest.approx(PAPER["fifo_jct_s"][-1], rel=0.02)
    uniform = len(HOSTS_PER_PLACEMENT)
    one = sum(simulate(TrafficPolicy.ONE, uniform, cal)) / 21
    assert one / curve[-1] == pytest.approx(1.0, abs=0.05)
    skewed_one = sum(simulate(TrafficPolicy.ONE, 1, cal)) / 21
    assert skewed_one < curve[0]


def test_fair_fifo_model_lets_round_robin_trail_one_as_in_the_seed() -> None:
    """Under fair sharing the skewed NIC stays overloaded even with priorities,
    so One (which finishes jobs one by one) beats RoundRobin (which makes them
    finish together): the seed's order. Under ``drain`` the two tie."""
    from ringleader.scenarios.tensorlights import PAPER, FifoModel, calibrate, mean_jct

    cal = calibrate(FifoModel.FAIR)
    assert cal.fifo is FifoModel.FAIR
    fifo = mean_jct(TrafficPolicy.FIFO, 1, cal, seeds=2)
    alone = mean_jct(TrafficPolicy.FIFO, 8, cal, seeds=2)
    assert fifo == pytest.approx(PAPER["fifo_jct_s"][0], rel=0.02)
    assert alone == pytest.approx(PAPER["fifo_jct_s"][-1], rel=0.01)
    one = mean_jct(TrafficPolicy.ONE, 1, cal, seeds=2)
    rr = mean_jct(TrafficPolicy.ROUND_ROBIN, 1, cal, seeds=2)
    assert one < rr < fifo
    assert rr - one > 0.03 * fifo
