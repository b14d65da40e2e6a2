"""A real Slurm cluster on this machine: a controller and N slurmd nodes in namespaces.

Every host is a process holding new network, UTS and mount namespaces (an
``unshare ... sleep`` the lab keeps), so each slurmd has a hostname, an address
and an ``/etc/hosts`` of its own, while all share the file system: one munge
key and socket, one configuration, one spool tree under the lab's root.

```
 ctl  (slurmctld, and srun/sbatch for clients; bridge br0, SUBNET.1)
  ├── n1  slurmd, SUBNET.11
  ├── n2  slurmd, SUBNET.12
  └── n3  slurmd, SUBNET.13
```

Daemons are entered with ``nsenter`` into the holder's namespaces, never with
``ip netns exec``, which remounts ``/sys`` and hides the cgroup tree. The lab
writes what it started to ``ROOT/lab.json``, so ``down`` works from another
process (``python -m ringleader.slurm.lab down``), and nothing is left behind:
killing the holders removes the namespaces and the veths in them.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from ringleader.net.tc import NetCommandError
from ringleader.net.tc import run as net_run
from ringleader.slurm.conf import REST_PORT, LabShape, gres_conf, hosts_file, slurm_conf
from ringleader.slurm.hosts import alive, in_own_net, kill_inside

DEFAULT_ROOT = Path("/run/ringleader-slurm-lab")
DAEMONS = ("munged", "slurmctld", "slurmd")


class LabError(RuntimeError):
    """The lab cannot be brought up here; the message says what is missing."""


def _run(args: list[str]) -> None:
    """``net.tc.run``, its failure the lab's: up() names what went wrong and undoes it."""
    try:
        net_run(args)
    except NetCommandError as err:
        raise LabError(str(err)) from None


def missing_tools() -> list[str]:
    """The programs the lab needs that are not on PATH (Debian: ``apt-get install
    slurmctld slurmd slurm-client slurmrestd slurm-wlm-jwt-plugin munge``)."""
    daemons = ["munged", "slurmctld", "slurmd", "slurmrestd"]
    tools = [*daemons, "srun", "sinfo", "unshare", "nsenter", "ip"]
    return [t for t in tools if shutil.which(t) is None]


@dataclass
class SlurmLab:
    """One lab: ``up()`` then ``down()``, or ``with SlurmLab() as lab:``."""

    shape: LabShape = field(default_factory=LabShape)
    root: Path = DEFAULT_ROOT
    holders: dict[str, int] = field(default_factory=dict)
    daemons: dict[str, int] = field(default_factory=dict)
    _children: list[subprocess.Popen[bytes]] = field(default_factory=list, repr=False)
    """What this process started, to reap at ``down`` (a lab saved by another has none)."""

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    def env(self) -> dict[str, str]:
        """What a Slurm client needs to find this lab: its configuration."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def on_controller(self, args: list[str]) -> list[str]:
        """``args`` run inside the controller host, where the nodes reach srun back."""
        return ["nsenter", "-t", str(self.holders["ctl"]), "--net", "--uts", "--mount", *args]

    def run(
        self, args: list[str], timeout: float = 60.0, env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """A command on the controller host (``srun``, ``sinfo``, a ringleader client),
        with ``env`` over the lab's."""
        return subprocess.run(
            self.on_controller(args),
            capture_output=True,
            text=True,
            env={**self.env(), **(env or {})},
            timeout=timeout,
        )

    def __enter__(self) -> SlurmLab:
        self.up()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.down()

    def up(self, timeout_s: float = 60.0) -> None:
        """Build the hosts, start munged, slurmctld and every slurmd, and wait until each
        node is idle; on any failure everything started is taken down again."""
        missing = missing_tools()
        if missing:
            raise LabError(
                f"missing {', '.join(missing)}: apt-get install slurmctld slurmd slurm-client "
                "slurmrestd slurm-wlm-jwt-plugin munge"
            )
        if os.geteuid() != 0:
            raise LabError("the Slurm lab needs root (namespaces, veths, mknod)")
        if (self.root / "lab.json").exists():
            raise LabError(f"a lab is already up at {self.root}: take it down first")
        try:
            self._files()
            self._hosts()
            self._start_daemons()
            self.wait_idle(timeout_s)
        except BaseException:
            self.down()
            raise

    def _files(self) -> None:
        for sub in ("munge", "jwt", "state", "spool", "run", "log", "dev"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(self.root / "munge", 0o700)
        os.chmod(self.root / "jwt", 0o700)
        jwt_key = self.root / "jwt" / "jwt.key"
        jwt_key.write_bytes(os.urandom(32).hex().encode())  # slurmctld signs tokens with it
        jwt_key.chmod(0o600)
        key = self.root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        for i in range(self.shape.gpus_per_node):
            device = self.root / "dev" / f"gpu{i}"
            if not device.exists():
                os.mknod(device, 0o666 | 0o020000, os.makedev(1, 3))  # a /dev/null twin
        for name in self.shape.names:
            (self.root / "spool" / name).mkdir(exist_ok=True)
        self.conf.write_text(slurm_conf(self.shape, self.root))
        (self.root / "gres.conf").write_text(gres_conf(self.shape, self.root))
        (self.root / "hosts").write_text(hosts_file(self.shape))

    def _hosts(self) -> None:
        for name in ["ctl", *self.shape.names]:
            holder = subprocess.Popen(
                [
                    "unshare",
                    "--net",
                    "--uts",
                    "--mount",
                    "--propagation",
                    "private",
                    "sleep",
                    "infinity",
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            self._children.append(holder)
            self.holders[name] = holder.pid
            self._save()
        deadline = time.monotonic() + 10
        while not all(in_own_net(p) for p in self.holders.values()):
            if time.monotonic() > deadline:
                raise LabError("the lab's namespace holders did not start")
            time.sleep(0.02)
        for name, pid in self.holders.items():
            enter = ["nsenter", "-t", str(pid), "--uts", "--mount"]
            _run([*enter, "hostname", name])
            _run([*enter, "mount", "--bind", str(self.root / "hosts"), "/etc/hosts"])
            _run(["nsenter", "-t", str(pid), "--net", "ip", "link", "set", "lo", "up"])
        ctl = ["nsenter", "-t", str(self.holders["ctl"]), "--net"]
        _run([*ctl, "ip", "link", "add", "br0", "type", "bridge"])
        _run([*ctl, "ip", "addr", "add", f"{self.shape.address(0)}/24", "dev", "br0"])
        _run([*ctl, "ip", "link", "set", "br0", "up"])
        for i, name in enumerate(self.shape.names, start=1):
            self._cable(name, i)

    def _cable(self, name: str, i: int) -> None:
        """A veth from node ``name`` to the controller's bridge."""
        outer, inner = f"rls{os.getpid() % 10000}{name}", f"rls{os.getpid() % 10000}{name}p"
        _run(["ip", "link", "add", outer, "type", "veth", "peer", "name", inner])
        _run(["ip", "link", "set", outer, "netns", str(self.holders["ctl"])])
        _run(["ip", "link", "set", inner, "netns", str(self.holders[name])])
        ctl = ["nsenter", "-t", str(self.holders["ctl"]), "--net", "ip", "link", "set", outer]
        _run([*ctl, "master", "br0"])
        _run([*ctl, "up"])
        node = ["nsenter", "-t", str(self.holders[name]), "--net", "ip"]
        _run([*node, "link", "set", inner, "name", "eth0"])
        _run([*node, "addr", "add", f"{self.shape.address(i)}/24", "dev", "eth0"])
        _run([*node, "link", "set", "eth0", "up"])

    def _start_daemons(self) -> None:
        m = self.root / "munge"
        self._daemon(
            "munged",
            None,
            [
                "munged",
                "--foreground",
                "--force",
                f"--socket={m}/munge.socket",
                f"--key-file={m}/munge.key",
                f"--pid-file={m}/munged.pid",
                f"--log-file={m}/munged.log",
                f"--seed-file={m}/munged.seed",
            ],
        )
        deadline = time.monotonic() + 10
        while not (m / "munge.socket").exists():
            if time.monotonic() > deadline:
                raise LabError(f"munged did not start: see {m}/munged.log")
            time.sleep(0.02)
        self._daemon("slurmctld", "ctl", ["slurmctld", "-D", "-c", "-i", "-f", str(self.conf)])
        for name in self.shape.names:
            self._daemon(f"slurmd-{name}", name, ["slurmd", "-D", "-f", str(self.conf)])

    def _daemon(
        self, key: str, host: str | None, args: list[str], env: Mapping[str, str] | None = None
    ) -> None:
        if host is not None:
            args = ["nsenter", "-t", str(self.holders[host]), "--net", "--uts", "--mount", *args]
        log = open(self.root / "log" / f"{key}.out", "ab")  # noqa: SIM115 - the daemon's
        with log:
            proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env={**self.env(), **(env or {})},
                start_new_session=True,
            )
        self._children.append(proc)
        self.daemons[key] = proc.pid
        self._save()

    def wait_idle(self, timeout_s: float) -> None:
        """Until every node reports idle (``sinfo``), or ``LabError`` with the logs' tail."""
        deadline = time.monotonic() + timeout_s
        last = ""
        while time.monotonic() < deadline:
            for key, pid in self.daemons.items():
                if not alive(pid):
                    raise LabError(f"{key} exited: see {self.root}/log/{key}.out")
            with contextlib.suppress(subprocess.TimeoutExpired):
                done = self.run(["sinfo", "-h", "-N", "-o", "%N %t"], timeout=10)
                last = done.stdout.strip() or done.stderr.strip()
                states = dict(line.split() for line in done.stdout.splitlines() if line.strip())
                if done.returncode == 0 and all(states.get(n) == "idle" for n in self.shape.names):
                    return
            time.sleep(0.3)
        raise LabError(f"nodes not idle after {timeout_s:g} s: {last}")

    def _save(self) -> None:
        state = {"holders": self.holders, "daemons": self.daemons, "shape": self.shape.nodes}
        (self.root / "lab.json").write_text(json.dumps(state))

    @property
    def rest_url(self) -> str:
        """Where ``start_rest``'s slurmrestd listens: on the controller host."""
        return f"http://{self.shape.address(0)}:{REST_PORT}"

    def start_rest(self) -> None:
        """slurmrestd on the controller host, taking JWTs (``token``) and nothing else,
        as an unprivileged user (it refuses to serve JWTs as root)."""
        args = ["slurmrestd", "-f", str(self.conf), "-a", "rest_auth/jwt"]
        address = f"{self.shape.address(0)}:{REST_PORT}"
        args += ["-s", "openapi/v0.0.38", "-u", "nobody", address]
        self._daemon("slurmrestd", "ctl", args, env={"SLURM_JWT": "daemon"})
        deadline = time.monotonic() + 10
        while f":{REST_PORT} " not in self.run(["ss", "-ltn"], timeout=10).stdout:
            if not alive(self.daemons["slurmrestd"]) or time.monotonic() > deadline:
                raise LabError(f"slurmrestd did not start: see {self.root}/log/slurmrestd.out")
            time.sleep(0.05)

    def stop_rest(self) -> None:
        """slurmrestd dies (SIGKILL); slurmctld and the nodes run on."""
        self._kill_daemon("slurmrestd")

    def _kill_daemon(self, key: str) -> None:
        pid = self.daemons.pop(key)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        while alive(pid):
            time.sleep(0.02)
        self._save()

    def token(self, user: str = "root", lifespan_s: int = 3600) -> str:
        """A JWT for ``user`` from slurmctld (``scontrol token``), for ``SLURM_JWT``."""
        done = self.run(["scontrol", "token", f"username={user}", f"lifespan={lifespan_s}"])
        if done.returncode != 0:
            raise LabError(f"scontrol token failed: {done.stderr.strip()}")
        return done.stdout.strip().removeprefix("SLURM_JWT=")

    def fail_node(self, name: str) -> None:
        """Node ``name`` loses power: its cable goes dead first (its peers hear
        nothing more, not a reset), then every process on it (slurmd, slurmstepd, the
        job's tasks) is killed. Slurm finds out as it would: slurmd stops answering."""
        holder = self.holders[name]
        _run(["nsenter", "-t", str(holder), "--net", "ip", "link", "set", "eth0", "down"])
        kill_inside([holder])
        self.daemons.pop(f"slurmd-{name}", None)
        self._save()

    def stop_controller(self) -> None:
        """slurmctld dies (SIGKILL): every Slurm command fails until ``start_controller``;
        the nodes and the jobs' tasks run on."""
        self._kill_daemon("slurmctld")

    def jobs_saved_since(self, when: float) -> bool:
        """Whether slurmctld wrote its job state (``StateSaveLocation``) at or after
        ``when``: a job it started before then survives its restart."""
        saved = self.root / "state" / "job_state"
        return saved.exists() and saved.stat().st_mtime >= when

    def start_controller(self) -> None:
        """slurmctld again, from its saved state (jobs, nodes): as an admin restarts it."""
        self._daemon("slurmctld", "ctl", ["slurmctld", "-D", "-i", "-f", str(self.conf)])

    def down(self) -> None:
        """Stop every daemon and holder this lab (or one saved at its root) started."""
        saved = self.root / "lab.json"
        if saved.exists() and not self.holders:
            state = json.loads(saved.read_text())
            self.holders, self.daemons = state["holders"], state["daemons"]
        for pid in [*self.daemons.values(), *self.holders.values()]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGTERM)
        kill_inside(self.holders.values())  # slurmstepd and job tasks, in sessions of their own
        deadline = time.monotonic() + 10
        for pid in [*self.daemons.values(), *self.holders.values()]:
            while alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        for child in self._children:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=5)
        self._children.clear()
        self.daemons.clear()
        self.holders.clear()
        saved.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> None:
    """``python -m ringleader.slurm.lab up|down|status``."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("up", "down", "status"))
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--gpus-per-node", type=int, default=2)
    args = parser.parse_args(argv)
    lab = SlurmLab(LabShape(args.nodes, args.gpus_per_node), args.root)
    try:
        if args.action == "up":
            lab.up()
            print(f"Slurm lab up: {args.nodes} nodes; SLURM_CONF={lab.conf}")
            print(
                f"clients run on its controller: nsenter -t {lab.holders['ctl']} "
                "--net --uts --mount srun ..."
            )
        elif args.action == "down":
            lab.down()
            print("Slurm lab down")
        else:
            saved = args.root / "lab.json"
            print(saved.read_text() if saved.exists() else "no lab is up")
    except LabError as err:
        raise SystemExit(f"error: {err}") from None


if __name__ == "__main__":
    main()
