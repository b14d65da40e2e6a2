"""The lab's Slurm and GRES configuration, written from its shape.

Choices an external scheduler needs (SPEC section on Slurm; ``docs/slurm.md``):
``priority/basic`` (Slurm's own documentation: for a cluster "controlled by an
external scheduler"), backfill so a released job starts within a second, no
accounting database, and process tracking without cgroups (the nodes are
namespaces of one machine, which has one cgroup tree).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SUBNET = "10.251.0"
"""The lab's addresses: they exist only inside the namespaces it creates."""
REST_PORT = 6820
"""slurmrestd's port on the controller host (``SlurmLab.start_rest``)."""


@dataclass(frozen=True, slots=True)
class LabShape:
    """How many nodes, and what each has."""

    nodes: int = 3
    gpus_per_node: int = 2
    cpus_per_node: int = 2
    memory_mb: int = 2048

    def __post_init__(self) -> None:
        if not 1 <= self.nodes <= 200:
            raise ValueError(f"nodes: {self.nodes} is outside 1..200")
        if not 0 <= self.gpus_per_node <= 16:
            raise ValueError(f"gpus_per_node: {self.gpus_per_node} is outside 0..16")

    @property
    def names(self) -> list[str]:
        return [f"n{i + 1}" for i in range(self.nodes)]

    @staticmethod
    def address(host: int) -> str:
        """Host 0 is the controller; node ``i`` (from 1) is host ``i``."""
        return f"{SUBNET}.{host + 1 if host == 0 else host + 10}"


def hosts_file(shape: LabShape) -> str:
    """Every host by name, in IPv4 and as IPv4-mapped IPv6 (gloo asks for both; without
    the second each start waits on a resolver that is not there)."""
    lines = ["127.0.0.1 localhost", "::1 localhost ip6-localhost"]
    for i, name in enumerate(["ctl", *shape.names]):
        lines.append(f"{shape.address(i)} {name}")
        lines.append(f"::ffff:{shape.address(i)} {name}")
    return "\n".join(lines) + "\n"


def slurm_conf(shape: LabShape, root: Path) -> str:
    """``slurm.conf`` for a lab whose files live under ``root``."""
    nodes = ",".join(shape.names)
    gres = f" Gres=gpu:{shape.gpus_per_node}" if shape.gpus_per_node else ""
    node_lines = "\n".join(
        f"NodeName={name} NodeAddr={shape.address(i + 1)} CPUs={shape.cpus_per_node} "
        f"RealMemory={shape.memory_mb}{gres} State=UNKNOWN"
        for i, name in enumerate(shape.names)
    )
    return f"""\
ClusterName=ringleader-lab
SlurmctldHost=ctl({shape.address(0)})
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge/munge.socket
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key={root}/jwt/jwt.key
SlurmUser=root
SlurmdUser=root
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/run/slurmctld.pid
SlurmdPidFile={root}/run/slurmd-%n.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SwitchType=switch/none
LaunchParameters=use_interactive_step
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
PriorityType=priority/basic
GresTypes=gpu
ReturnToService=2
SlurmdTimeout=10
MessageTimeout=5
InactiveLimit=0
KillWait=5
MinJobAge=300
{node_lines}
PartitionName=gpu Nodes={nodes} Default=YES MaxTime=INFINITE State=UP
PartitionName=share Nodes={nodes} Default=NO MaxTime=INFINITE OverSubscribe=FORCE:4 State=UP
"""


def gres_conf(shape: LabShape, root: Path) -> str:
    """GPUs as character devices (``mknod c 1 3``): a regular file gives no
    ``CUDA_VISIBLE_DEVICES``, and a count without ``File=`` registers none."""
    if not shape.gpus_per_node:
        return ""
    last = shape.gpus_per_node - 1
    files = f"{root}/dev/gpu[0-{last}]" if last else f"{root}/dev/gpu0"
    return f"NodeName={','.join(shape.names)} Name=gpu File={files}\n"
