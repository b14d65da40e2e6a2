"""TensorLights: the policy stage (pure), the tc agent and netlab in real namespaces."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ringleader.net.agent import TrafficAgent
from ringleader.net.netns import reachable_namespace
from ringleader.net.tc import NetCommandError, have_net_admin, run
from ringleader.policy.model.views import ClusterView, JobView
from ringleader.policy.pipeline import Policy
from ringleader.policy.traffic import Priorities, TrafficPolicy, traffic_priorities
from ringleader.runtime.control.traffic import device_mbit, group_ports, merged_ranks
from ringleader.runtime.workers.executor.local import free_port
from ringleader.spine.needs import RUNTIME, serve_policy
from tests.helpers import default_policy, sized_job
from tests.live_server import LiveServer, server_cli, wait_for

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
    both = TrafficAgent("eth0", 100, netns=netns, both_ways=True)
    both.apply({5001: 0, 5002: 1})
    shown = run(["tc", "filter", "show", "dev", "eth0", "parent", "1:"], netns=netns)
    # 5001 = 0x1389: from the port (high half) and to it (low half), into one class.
    assert "match 13890000/ffff0000 at 20" in shown and "match 00001389/0000ffff at 20" in shown
    assert shown.count("flowid 1:10") == 2 and shown.count("flowid 1:11") == 2
    assert both.filters() == {5001: "1:10", 5002: "1:11"}
    both.apply({5002: 0})
    shown = run(["tc", "filter", "show", "dev", "eth0", "parent", "1:"], netns=netns)
    assert shown.count("flowid") == 2 and "1389" not in shown
    both.remove()
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
    fifo = run_once(NetlabConfig(TrafficPolicy.FIFO, steps=10))
    one = run_once(NetlabConfig(TrafficPolicy.ONE, steps=10))
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


# -- the traffic stage in a Policy ------------------------------------------------


def _ps(name: str, *, at: float = 0.0, gpus: int = 2, ps: bool = True, **kw: Any) -> JobView:
    return sized_job(name, gpus, at, parameter_server=ps, **kw)


def test_the_default_ranks_parameter_servers_that_share_a_node_in_its_own_order() -> None:
    jobs = [
        _ps("early", at=0.0),
        _ps("late", at=10.0),
        _ps("urgent", at=20.0, priority=5),  # the order stage puts priority first
        _ps("allreduce", at=30.0, ps=False),  # not a PS: never ranked
    ]
    plan = default_policy().decide(jobs, ClusterView.uniform(1, 8), now=100.0)
    assert all(plan.of(j.id).running for j in jobs)
    assert plan.traffic == {"node0": {"urgent": 0, "early": 1, "late": 2}}
    # Each PS alone on its node: nothing to rank.
    apart = default_policy().decide(jobs[:2], ClusterView.uniform(2, 2), now=100.0)
    assert {apart.of(j).devices[0].node for j in ("early", "late")} == {"node0", "node1"}
    assert apart.traffic == {}


def test_a_policy_without_the_stage_or_a_fifo_stage_sets_no_ranks() -> None:
    cluster = ClusterView.uniform(1, 4)
    jobs = [_ps("a"), _ps("b", at=1.0)]
    assert default_policy().decide(jobs, cluster, 0.0).traffic == {"node0": {"a": 0, "b": 1}}
    assert replace(default_policy(), traffic=None).decide(jobs, cluster, 0.0).traffic == {}
    fifo = replace(default_policy(), traffic=Priorities(TrafficPolicy.FIFO))
    assert fifo.decide(jobs, cluster, 0.0).traffic == {}
    # A suspended or waiting PS sends nothing: only running jobs are ranked.
    waiting = [_ps("a"), _ps("b", at=1.0), _ps("c", at=2.0)]
    plan = default_policy().decide(waiting, cluster, 0.0)
    assert not plan.of("c").running
    assert plan.traffic == {"node0": {"a": 0, "b": 1}}


def test_round_robin_rotates_the_ranks_and_asks_to_decide_again_at_the_turn() -> None:
    cluster = ClusterView.uniform(1, 4)
    jobs = [_ps("a"), _ps("b", at=1.0)]
    rr = replace(default_policy(), traffic=Priorities(TrafficPolicy.ROUND_ROBIN, interval_s=20.0))
    first, second = rr.decide(jobs, cluster, 5.0), rr.decide(jobs, cluster, 25.0)
    assert first.traffic == {"node0": {"a": 0, "b": 1}}
    assert second.traffic == {"node0": {"a": 1, "b": 0}}
    assert first.wake_at == 20.0 and second.wake_at == 40.0
    with pytest.raises(ValueError, match="interval_s"):
        Priorities(TrafficPolicy.ROUND_ROBIN, interval_s=0.0)


def test_a_body_that_cannot_shape_runs_the_default_without_ranks() -> None:
    policy = default_policy()
    assert policy.needs.traffic
    served = serve_policy(policy, RUNTIME)
    assert isinstance(served, Policy) and served.traffic is None and not served.needs.traffic
    assert served.order == policy.order and served.share == policy.share
    shaping = serve_policy(policy, replace(RUNTIME, traffic=True))
    assert isinstance(shaping, Policy) and shaping.traffic == policy.traffic


# -- finding a parameter server's ports --------------------------------------------

LISTENER = """
import os, socket, subprocess, sys, time
a = socket.socket(); a.bind(("127.0.0.1", 0)); a.listen()
b = socket.socket(socket.AF_INET6); b.bind(("::1", 0)); b.listen()
c = socket.create_connection(b.getsockname()[:2])  # a connection it opened: its end
child = subprocess.Popen([sys.executable, "-c",
    "import socket, time; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen();"
    "print(s.getsockname()[1], flush=True); time.sleep(60)"], stdout=subprocess.PIPE)
print(a.getsockname()[1], b.getsockname()[1], c.getsockname()[1],
      child.stdout.readline().decode().strip(), flush=True)
time.sleep(60)
"""


def test_a_ranks_ports_are_the_ones_its_process_group_holds() -> None:
    leader = subprocess.Popen(
        [sys.executable, "-c", LISTENER],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    outsider = subprocess.Popen([sys.executable, "-c", LISTENER], stdout=subprocess.PIPE, text=True)
    try:
        assert leader.stdout is not None and outsider.stdout is not None
        ports = {int(p) for p in leader.stdout.readline().split()}
        outside = {int(p) for p in outsider.stdout.readline().split()}
        # Listening on IPv4 and IPv6, the local end of a connection it opened, and a
        # child's listener (the same process group).
        assert len(ports) == 4
        assert group_ports(leader.pid) == ports
        # Another process's sockets are not the rank's; and a pid that leads no group
        # (this one runs in pytest's) is not a gang rank: nothing is found for it.
        assert outside.isdisjoint(ports) and len(outside) == 4
        assert group_ports(outsider.pid) == set()
    finally:
        for proc in (leader, outsider):
            os.killpg(proc.pid, signal.SIGKILL) if proc is leader else proc.kill()
            proc.wait()
    assert group_ports(leader.pid) == set()  # gone: nothing to shape


def test_every_node_here_is_one_host_so_ranks_merge_and_speeds_come_from_sysfs(
    tmp_path: Path,
) -> None:
    assert merged_ranks({"n0": {"a": 0, "b": 1}, "n1": {"c": 0, "a": 1}}) == {
        "a": 0,
        "b": 1,
        "c": 0,
    }
    (tmp_path / "eth0").mkdir()
    (tmp_path / "eth0" / "speed").write_text("10000\n")
    (tmp_path / "veth0").mkdir()
    (tmp_path / "veth0" / "speed").write_text("-1\n")
    assert device_mbit("eth0", tmp_path) == 10000.0
    assert device_mbit("veth0", tmp_path) is None
    assert device_mbit("nosuch", tmp_path) is None


# -- the runtime applies the ranks -----------------------------------------------

PS_JOB = (
    "python -m ringleader.workloads.ps --epochs 1 --hidden 256 --examples-per-epoch 1024 "
    "--checkpoint-every-s 60"
)


@pytest.fixture
def reachable_netns() -> Iterator[tuple[str, str]]:
    with reachable_namespace() as ns:
        yield ns.name, ns.address


def _job_ports(state_dir: Path, job_id: str) -> set[int]:
    """The ports job ``job_id``'s ranks send from (none before all three have started)."""
    pid_files = list((state_dir / "jobs" / job_id / "run").glob("gen*/rank*.pid"))
    if len(pid_files) != 3:
        return set()
    return set().union(*(group_ports(int(f.read_text().split()[0])) for f in pid_files))


@needs_net_admin
def test_the_server_puts_real_parameter_servers_on_the_nic_in_the_policys_order(
    tmp_path: Path, reachable_netns: tuple[str, str]
) -> None:
    netns, address = reachable_netns
    state = tmp_path / "state"
    server = LiveServer(
        state,
        6,
        1.0,
        "--policy",
        "ringleader",
        "--traffic-device",
        "lo",  # the namespace's own: where the local executor's PS traffic flows
        # Slow enough that both jobs still train once the later one's group is up,
        # on a loaded machine too (each step's updates take about 0.3 s alone).
        "--traffic-mbit",
        "20",
        netns=netns,
        host=address,
    ).start()
    agent = TrafficAgent("lo", 20, netns=netns)
    try:
        assert agent.installed()
        first = server.submit({"name": "first", "command": PS_JOB, "arch": "ps", "gpus": 3})
        second = server.submit({"name": "second", "command": PS_JOB, "arch": "ps", "gpus": 3})

        def ranked_as_held() -> bool:
            # The ports are every rank's sockets, found in the kernel, ranked in
            # submission order (the same queue, the same priority): the workers'
            # traffic to each other crosses this loopback too. Looked up at every
            # tick: a rank opens its gloo sockets only once its group is up.
            filters = agent.filters()
            return all(
                {p for p, c in filters.items() if c == leaf} == _job_ports(state, job) != set()
                for job, leaf in ((first, "1:10"), (second, "1:11"))
            )

        wait_for(ranked_as_held, 60, "both jobs' ports ranked as their ranks hold them")
        # One PS left: nothing to rank, every filter gone (it trains on, unranked).
        server.cancel(first)
        wait_for(lambda: agent.filters() == {}, 30, "the filters to be removed")
        assert server.job(second)["state"] == "running"
    finally:
        server.stop()
        server.kill_workers()
    assert not agent.installed()  # the server takes its tree off at exit
    assert "traffic ranks on lo: first" in (state / "server.log").read_text()


@needs_net_admin
def test_a_traffic_device_that_cannot_be_shaped_is_refused_naming_the_flag(
    tmp_path: Path,
) -> None:
    for device, said in (
        ("../x", "not a network device name"),
        ("rlnosuch0", "Cannot find device"),
    ):
        out = server_cli(
            "--state-dir",
            str(tmp_path),
            "--port",
            str(free_port()),
            "--traffic-device",
            device,
            "--traffic-mbit",
            "100",
        )
        assert out.returncode == 2, out.stderr
        assert f"--traffic-device {device}" in out.stderr or repr(device) in out.stderr
        assert said in out.stderr and "Traceback" not in out.stderr


class _Agent:
    """Records what a ``TrafficControl`` asks of its agent (``tc`` itself is tested above)."""

    device = "lo"

    def __init__(self) -> None:
        self.applied: list[dict[int, int]] = []

    def apply(self, priorities: dict[int, int]) -> None:
        self.applied.append(dict(priorities))


HOARDER = """
import socket, sys, time
held = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(); held.append(s)
print("ready", flush=True)
time.sleep(60)
"""


def test_a_job_that_holds_too_many_ports_is_not_ranked(caplog: pytest.LogCaptureFixture) -> None:
    from ringleader.runtime.control.traffic import MAX_PORTS_PER_RANK, TrafficControl

    procs = {
        n: subprocess.Popen(
            [sys.executable, "-c", HOARDER, str(n)],
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        for n in (3, 2, MAX_PORTS_PER_RANK + 1)
    }
    try:
        for proc in procs.values():
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        # "fair" has two ranks (3 ports and 2), "hoarder" one rank over the limit.
        fair, worker, hoarder = (procs[n].pid for n in (3, 2, MAX_PORTS_PER_RANK + 1))
        agent = _Agent()
        gangs = {"fair": [fair, worker], "hoarder": [hoarder]}
        control = TrafficControl(agent, lambda job_dir, gen: gangs[job_dir.name])  # type: ignore[arg-type]
        running = {"fair": (Path("fair"), 1), "hoarder": (Path("hoarder"), 1)}
        control.carry_out({"fair": 0, "hoarder": 1}, running)
        control.carry_out({"fair": 0, "hoarder": 1}, running)  # unchanged: not applied again
        ranked = group_ports(fair) | group_ports(worker)
        assert agent.applied == [dict.fromkeys(ranked, 0)]
        assert len(agent.applied[0]) == 5  # every rank's ports, not only rank 0's
        warned = [r for r in caplog.records if "holds" in r.getMessage()]
        assert len(warned) == 1 and "hoarder" in warned[0].getMessage()
    finally:
        for proc in procs.values():
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
