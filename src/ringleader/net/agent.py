"""The per-host TensorLights agent: job priorities → htb classes and u32 filters.

On the egress interface it installs (once, idempotently):

```
1:    htb root, unclassified traffic to 1:ff
1:1   rate = ceil = link rate
1:10 … 1:17   leaf classes, prio 0 … 7, small guaranteed rate, ceil = link
1:ff  default leaf, prio 7
1:fe  marker class: "this tree is ringleader's"
```

Every leaf (and the default) gets a deep pfifo (``LEAF_PACKETS``), the same
for all policies.

A job's PS traffic is classified by the PS's TCP source port (the PS listens
on it, so every model update to a worker leaves with that source port); a u32
filter per job points at the leaf of its priority rank. Changing priorities —
including every RoundRobin rotation — only re-points filters with
``tc filter replace``: the root qdisc is never rebuilt (that would let traffic
through unshaped) and no busy class's prio is changed in place (that does not
take effect until the class goes idle). FIFO is the same tree with no filters:
one queue, the same link rate, so only the ordering differs between policies.

htb has eight priority levels: ranks beyond 7 share the lowest.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ringleader.net.tc import NetCommandError, run

LEVELS = 8
LEAF_PACKETS = 20_000
"""Queue per leaf: deep enough that a starved job's packets wait instead of being
dropped — a drop costs a TCP retransmission timeout (≥ 200 ms) and makes the
very straggler priorities are meant to prevent."""
MARKER = "1:fe"
DEFAULT = "1:ff"


def _leaf(rank: int) -> str:
    return f"1:{0x10 + min(rank, LEVELS - 1):x}"


@dataclass
class TrafficAgent:
    """Priorities for PS traffic leaving ``device`` (in ``netns`` if given)."""

    device: str
    link_mbit: float
    netns: str | None = None
    both_ways: bool = False
    """Also classify packets *to* each port: on a loopback the PS's workers on this host
    push their gradients through the same device, and at the lowest class they would
    hold back the very job ranked first (``ringleader.runtime.control.traffic``)."""
    _handles: dict[tuple[int, str], int] = field(default_factory=dict)

    def _tc(self, *args: str, check: bool = True) -> str:
        return run(["tc", *args], netns=self.netns, check=check)

    def installed(self) -> bool:
        """Whether our tree is on the device (the marker class is there)."""
        out = self._tc("class", "show", "dev", self.device, check=False)
        return f"class htb {MARKER} " in out

    def install(self) -> None:
        if self.installed():
            return
        qdiscs = self._tc("qdisc", "show", "dev", self.device)
        if "qdisc htb 1: root" in qdiscs:
            raise NetCommandError(
                ["tc", "qdisc", "show", "dev", self.device],
                "an htb root qdisc that ringleader did not create is installed; "
                "remove it first (tc qdisc del dev DEV root)",
            )
        link = f"{self.link_mbit}mbit"
        floor = f"{max(self.link_mbit / 1000, 0.01)}mbit"
        dev = ("dev", self.device)
        self._tc("qdisc", "replace", *dev, "root", "handle", "1:", "htb", "default", "ff")
        self._tc(
            "class",
            "add",
            *dev,
            "parent",
            "1:",
            "classid",
            "1:1",
            "htb",
            "rate",
            link,
            "ceil",
            link,
        )
        for rank in range(LEVELS):
            self._tc(
                "class",
                "add",
                *dev,
                "parent",
                "1:1",
                "classid",
                _leaf(rank),
                "htb",
                "rate",
                floor,
                "ceil",
                link,
                "prio",
                str(rank),
            )
        self._tc(
            "class",
            "add",
            *dev,
            "parent",
            "1:1",
            "classid",
            DEFAULT,
            "htb",
            "rate",
            floor,
            "ceil",
            link,
            "prio",
            str(LEVELS - 1),
        )
        self._tc(
            "class",
            "add",
            *dev,
            "parent",
            "1:1",
            "classid",
            MARKER,
            "htb",
            "rate",
            floor,
            "ceil",
            floor,
            "prio",
            str(LEVELS - 1),
        )

    def apply(self, priorities: Mapping[int, int]) -> None:
        """Point each PS port's traffic at the class of its rank; drop ports not listed.

        ``priorities`` maps a PS's TCP port to its rank (0 first). Safe to call
        again with the same or new ranks: filters are replaced, never rebuilt.
        """
        self.install()
        for port in priorities:
            if not 0 < port < 65536:
                raise ValueError(f"not a TCP port: {port}")
        ways = ("sport", "dport") if self.both_ways else ("sport",)
        wanted = {(port, way) for port in priorities for way in ways}
        for key in sorted(set(self._handles) - wanted):
            self._filter("del", self._handles.pop(key))
        for port, rank in sorted(priorities.items()):
            for way in ways:
                if (port, way) not in self._handles:
                    # Never reuse a live handle: take one past the highest in use.
                    self._handles[port, way] = max(self._handles.values(), default=0xFF) + 1
                match = ("match", "ip", way, str(port), "0xffff", "flowid", _leaf(rank))
                self._filter("replace", self._handles[port, way], *match)

    def _filter(self, verb: str, handle: int, *rest: str) -> None:
        """One u32 filter of ours, addressed by its stable handle ``800::handle``."""
        self._tc(
            "filter",
            verb,
            "dev",
            self.device,
            "parent",
            "1:",
            "protocol",
            "ip",
            "prio",
            "1",
            "handle",
            f"800::{handle:x}",
            "u32",
            *rest,
        )

    def filters(self) -> dict[int, str]:
        """Port → class currently installed (read back from the kernel)."""
        out = self._tc("filter", "show", "dev", self.device, "parent", "1:")
        found: dict[int, str] = {}
        flow = None
        for line in out.splitlines():
            if "flowid" in line:
                flow = line.split("flowid")[1].split()[0]
            elif "match" in line and flow is not None:
                value, mask = (int(w, 16) for w in line.split()[1].split("/"))
                # Source port in the high half of the word at offset 20, destination low.
                found[value >> 16 if mask == 0xFFFF0000 else value & 0xFFFF] = flow
                flow = None
        return found

    def remove(self) -> None:
        """Delete everything this agent (or a crashed one before it) created."""
        if self.installed():
            self._tc("qdisc", "del", "dev", self.device, "root", check=False)
        self._handles.clear()
