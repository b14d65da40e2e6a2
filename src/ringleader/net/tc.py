"""Running ``tc`` and ``ip``: argument lists, never a shell; errors carry stderr."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence


class NetCommandError(RuntimeError):
    def __init__(self, argv: Sequence[str], stderr: str) -> None:
        self.argv = list(argv)
        self.stderr = stderr.strip()
        super().__init__(f"{' '.join(argv)}: {self.stderr}")


def run(argv: Sequence[str], *, netns: str | None = None, check: bool = True) -> str:
    """Run one command (inside ``netns`` when given) and return its stdout."""
    full = ["ip", "netns", "exec", netns, *argv] if netns else list(argv)
    done = subprocess.run(full, capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise NetCommandError(full, done.stderr)
    return done.stdout


def have_net_admin() -> tuple[bool, str]:
    """Whether this process can create network namespaces, and why not if it cannot."""
    import os
    import shutil

    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return False, f"'{tool}' is not installed (Debian: iproute2)"
    if os.geteuid() != 0:
        return False, "needs CAP_NET_ADMIN: run as root"
    name = f"rlprobe{os.getpid() % 100000}"
    probe = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True)
    if probe.returncode != 0:
        return False, f"cannot create a network namespace: {probe.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", name], capture_output=True)
    return True, ""
