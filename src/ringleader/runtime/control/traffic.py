"""A plan's traffic ranks on this host's NIC: TensorLights in the runtime.

The policy's traffic stage ranks, per node, the running jobs whose parameter
servers send from it (``Plan.traffic``). ``TrafficControl`` carries the ranks
out with the per-host ``tc`` agent (``ringleader.net.agent``) on the device
the server was given (``ringleader server --traffic-device``).

**Which packets are a job's.** Every model update a parameter server sends
leaves from one of its own TCP sockets, so its source port is one that
socket is bound to: a port the PS listens on, or the local end of a
connection it opened (gloo decides per pair of ranks which side connects,
by comparing their addresses, so a PS under ``torch.distributed`` has
both). The ports are read from the kernel — the local ports of the TCP
sockets the job's process groups hold open — so jobs need no change and no
port is fixed in advance; the agent points a ``u32`` filter per port at the
class of the job's rank, for packets from the port and, on a loopback, to
it (its workers' gradients). Ports are looked up again at every tick, since
a job opens them only once its process group is up, and again after a
restart.

Every rank's sockets count, not only the PS's: a job's workers also talk to
each other (the per-step agreement on stop or suspend, the gradient noise
measurement), and on a loopback that traffic crosses the same device. Left
unclassified it waits in the default class, the lowest, behind every ranked
job's queue, so the job ranked first would pause at each step for the last
one's (``bench/results/traffic-runtime.json``).

All of the local executor's nodes are this one host: their ranks meet on one
device, and two jobs of the same rank on different nodes share a class.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ringleader.net.agent import TrafficAgent
from ringleader.runtime.workers.procs import stat_fields

log = logging.getLogger(__name__)

TIME_WAIT = "06"
"""A closed connection's state: it belongs to no process any more."""

MAX_PORTS_PER_RANK = 256
"""More ports than a rank needs (one per peer it connected to, and its listeners): a
job holding more than this many per rank is not ranked, so no job can make the server
run thousands of ``tc`` commands a tick by opening sockets."""


def group_members(leaders: set[int], proc: Path = Path("/proc")) -> dict[int, list[int]]:
    """Every live process in each of ``leaders``' process groups (a gang rank's wrapper
    leads one), from one pass over ``/proc``."""
    members: dict[int, list[int]] = {leader: [] for leader in leaders}
    if not leaders:
        return members
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # ended meanwhile, or not ours to read
        fields = stat_fields(stat)
        if len(fields) > 2 and (group := int(fields[2])) in members:
            members[group].append(int(entry.name))
    return members


def socket_inodes(pids: Iterable[int], proc: Path = Path("/proc")) -> set[int]:
    """Inodes of the sockets the processes ``pids`` hold open."""
    inodes: set[int] = set()
    for pid in pids:
        fd_dir = proc / str(pid) / "fd"
        try:
            names = os.listdir(fd_dir)
        except OSError:
            continue
        for name in names:
            try:
                target = os.readlink(fd_dir / name)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(int(target[8:-1]))
    return inodes


def local_ports(pid: int, inodes: set[int], proc: Path = Path("/proc")) -> set[int]:
    """The local TCP ports (IPv4 and IPv6) the sockets ``inodes`` are bound to,
    listening or connected, in the network namespace of process ``pid``."""
    ports: set[int] = set()
    if not inodes:
        return ports
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc / str(pid) / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            # sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
            if len(cols) > 9 and cols[3] != TIME_WAIT and int(cols[9]) in inodes:
                ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return ports


def group_ports(leader: int, proc: Path = Path("/proc")) -> set[int]:
    """The ports the process group led by ``leader`` (one rank) sends from."""
    return all_group_ports({leader}, proc)[leader]


def all_group_ports(leaders: set[int], proc: Path = Path("/proc")) -> dict[int, set[int]]:
    """``group_ports`` of each of ``leaders``, reading ``/proc``'s process list once."""
    groups = group_members(leaders, proc)
    return {
        leader: local_ports(leader, socket_inodes(pids, proc), proc)
        for leader, pids in groups.items()
    }


def device_mbit(device: str, sys_net: Path = Path("/sys/class/net")) -> float | None:
    """A NIC's link speed in Mbit/s as the kernel reports it (None: unknown, as for
    virtual devices)."""
    try:
        speed = int((sys_net / device / "speed").read_text())
    except (OSError, ValueError):
        return None
    return float(speed) if speed > 0 else None


def merged_ranks(traffic: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    """One rank per job from the plan's per-node ranks (every node here is this host)."""
    ranks: dict[str, int] = {}
    for per_node in traffic.values():
        for job, rank in per_node.items():
            ranks[job] = min(rank, ranks.get(job, rank))
    return ranks


Leaders = Callable[[Path, int], list[int]]
"""The pids leading the process groups of a job generation's ranks on this host (its
job dir, generation), one per live rank."""


@dataclass
class TrafficControl:
    """Keeps the agent's filters equal to the plan's ranks, port by port."""

    agent: TrafficAgent
    leaders: Leaders
    applied: dict[int, int] = field(default_factory=dict)
    """Port → rank as installed now."""
    ports: dict[str, set[int]] = field(default_factory=dict)
    """Each ranked job's ports, as last found."""
    too_many: set[str] = field(default_factory=set)
    """Jobs left unranked for holding too many ports (warned about once)."""

    def start(self) -> None:
        """Install the agent's tree (refusing a root qdisc ringleader did not make)."""
        self.agent.install()

    def carry_out(self, ranks: Mapping[str, int], running: Mapping[str, tuple[Path, int]]) -> None:
        """Point each ranked job's ports at its rank's class; drop every other filter.

        ``running``: each running job's directory and generation.
        """
        leaders: dict[str, list[int]] = {}
        for job in ranks:
            where = running.get(job)
            if where is not None and (pids := self.leaders(*where)):
                leaders[job] = pids
        found = all_group_ports({pid for pids in leaders.values() for pid in pids})
        self.ports = {}
        for job, pids in leaders.items():
            ports = set().union(*(found[pid] for pid in pids))
            if len(ports) <= MAX_PORTS_PER_RANK * len(pids):
                self.ports[job] = ports
            elif job not in self.too_many:
                self.too_many.add(job)
                log.warning(
                    "job %s holds %d TCP ports (over %d a rank): its traffic is not ranked",
                    job,
                    len(ports),
                    MAX_PORTS_PER_RANK,
                )
        wanted: dict[int, int] = {}
        for job, ports in self.ports.items():
            for port in ports:
                wanted[port] = min(ranks[job], wanted.get(port, ranks[job]))
        if wanted != self.applied:
            self.agent.apply(wanted)
            log.info("traffic ranks on %s: %s", self.agent.device, self._describe(ranks))
            self.applied = wanted

    def _describe(self, ranks: Mapping[str, int]) -> str:
        shown = sorted((rank, job) for job, rank in ranks.items() if self.ports.get(job))
        return ", ".join(f"{job} {sorted(self.ports[job])} rank {r}" for r, job in shown) or "-"

    def close(self) -> None:
        """Take the tree off the device: with no server, no job is favoured."""
        self.agent.remove()
        self.applied = {}
