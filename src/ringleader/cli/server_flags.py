"""The flags of ``ringleader server``, one alias each, so that the command reads as its
list of settings; typer names each flag after its parameter."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

ExecutorFlag = Annotated[
    str,
    typer.Option(
        help="Where workers run: local (this machine), ray (a Ray cluster) or slurm (a "
        "Slurm cluster, found by SLURM_CONF and Slurm's commands; docs/slurm.md)."
    ),
]
AddressFlag = Annotated[
    str,
    typer.Option(help="Ray cluster address for --executor ray (host:port, or auto)."),
]
GpusFlag = Annotated[
    str | None,
    typer.Option(
        help="Devices: a count (4) or GPU types and counts (v100:2,k80:2). With real "
        "GPUs, at most that many of them, typed as the driver names them; else virtual "
        "CPU devices.",
    ),
]
StateDirFlag = Annotated[
    Path | None,
    typer.Option(
        help="Database, job logs and checkpoints (default: ~/.local/share/ringleader; "
        "root's: /var/lib/ringleader)."
    ),
]
HostFlag = Annotated[
    str,
    typer.Option(
        help="Address to serve the API on. Beyond loopback it needs --tls-cert and "
        "--tls-key, or --insecure-http."
    ),
]
PolicyFlag = Annotated[
    str,
    typer.Option(
        help="Any policy `ringleader policies` marks as served (not the oracles). "
        "Those that expect speed models on arrival get a short measured profiling phase."
    ),
]
ConfigFlag = Annotated[
    Path | None,
    typer.Option(
        help="YAML with policy, probe_window_s, round_s, quantum_s (overrides the flags)."
    ),
]
RoundSFlag = Annotated[float, typer.Option(min=0.1, help="Re-plan at least this often (seconds).")]
QuantumSFlag = Annotated[
    float | None,
    typer.Option(
        min=0.5,
        help="Time-slicing quantum: gandiva (default 60), ringleader's last queue (600).",
    ),
]
TiresiasThresholdsFlag = Annotated[
    str | None,
    typer.Option(
        help="Least-attained-service queue thresholds in GPU-seconds for tiresias and "
        "ringleader, comma-separated and rising, e.g. 3600,36000 (empty: one queue). "
        "ringleader time-slices its last queue.",
    ),
]
WarmStartFlag = Annotated[
    bool,
    typer.Option(
        help="Local executor: fork Python workers from a process with torch already "
        "imported, so launches and resizes skip ~2 s of start-up.",
    ),
]
MaxLogMibFlag = Annotated[
    int,
    typer.Option(
        min=0,
        max=1 << 20,
        help="Rotate a rank's log to rank<N>.log.1 past this many MiB (0: never).",
    ),
]
MaxProgressMibFlag = Annotated[
    int,
    typer.Option(
        min=0,
        max=1 << 20,
        help="Rotate a job's progress.jsonl to .1 past this many MiB (0: never).",
    ),
]
SlurmPartitionFlag = Annotated[
    str | None,
    typer.Option(
        help="With --executor slurm: the partition to run in (default: Slurm's default). "
        "On one whose OverSubscribe is FORCE or YES ringleader gives each rank its GPU "
        "and time-slices through scontrol suspend/resume (docs/slurm.md).",
    ),
]
SlurmUrlFlag = Annotated[
    str | None,
    typer.Option(
        help="With --executor slurm: reach Slurm through slurmrestd at this URL (e.g. "
        "http://slurm-head:6820) instead of Slurm's commands, with the JWT in the "
        "environment variable SLURM_JWT (`scontrol token`), or in the file SLURM_JWT_FILE "
        "names, read again when it changes. For a server outside the "
        "cluster's MUNGE perimeter; slurmrestd 22.05 cannot suspend, so no time-slicing "
        "(docs/slurm.md).",
    ),
]
TrafficDeviceFlag = Annotated[
    str | None,
    typer.Option(
        help="Apply the policy's traffic ranks (ringleader: parameter-server jobs that "
        "share this host send in its order) with tc on this NIC's egress, e.g. eth0. "
        "Needs root and the local executor; the tree is removed at exit.",
    ),
]
TrafficMbitFlag = Annotated[
    float | None,
    typer.Option(
        min=1,
        max=1e7,
        help="--traffic-device's rate in Mbit/s (default: the speed the kernel reports).",
    ),
]
TlsCertFlag = Annotated[
    Path | None, typer.Option(help="PEM certificate: serve HTTPS (with --tls-key).")
]
InsecureHttpFlag = Annotated[
    bool,
    typer.Option(
        help="Allow plain HTTP on a non-loopback --host: tokens cross the network readable."
    ),
]
IsolateJobsFlag = Annotated[
    bool,
    typer.Option(
        help="As root, run each user's jobs as their own Unix uid, in job directories "
        "only they can enter. --no-isolate-jobs runs them as root: for a machine with "
        "one user only, as a job can then read the database and every token."
    ),
]
ExitGraceSFlag = Annotated[
    float,
    typer.Option(
        min=0.5,
        max=3600,
        help="End a rank still there, idle, this long after its job's work is done (its "
        "other ranks exited 0, or it said done): a script that hangs at exit. The job "
        "then succeeds with a warning.",
    ),
]
LeaveJobsRunningFlag = Annotated[
    bool,
    typer.Option(
        "--leave-jobs-running",
        help="At an orderly stop (Ctrl-C, SIGTERM), leave running jobs running for the "
        "next server on this --state-dir to adopt (an upgrade). By default each is "
        "checkpointed, stopped and queued again, so no job outlives its server.",
    ),
]
HeaderTimeoutSFlag = Annotated[
    float,
    typer.Option(min=0.5, max=600, help="Close a connection whose request headers take longer."),
]
BodyTimeoutSFlag = Annotated[
    float,
    typer.Option(min=0.5, max=3600, help="Answer 408 to a body that takes longer."),
]
AllowHostFlag = Annotated[
    list[str] | None,
    typer.Option(
        help="Another name clients reach this server by (repeatable). Requests naming "
        "any other Host are refused, which stops DNS-rebinding web pages."
    ),
]
