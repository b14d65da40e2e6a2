"""How fast each running job goes: who shares a GPU or a host with whom, and at what cost.

The simulator's ground truth, not the policy's belief. A job runs at its profile's
speed for its size, times a factor for what it shares: a partner packed on its
GPU (``Contention.packed``; half speed where nothing was measured), GPUs on more
nodes than it needs (``Contention.spread``), the slowest GPU type it holds
(``SimJob.type_speed``, or its table on that type: ``sim.typed``), the most
crowded host resource it uses (``Host``), and the racks a gang spans
(``sim.topology``).
Worked out again whenever who runs where may have changed (``Simulator``).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Protocol

from ringleader.policy.model.views import ClusterView
from ringleader.sim.host import Host
from ringleader.sim.jobs import JobState
from ringleader.sim.topology import Topology
from ringleader.sim.typed import table_speed
from ringleader.spine.observe import co_runners


class Contention(Protocol):
    """How much sharing slows a job: the simulator's ground truth, not the policy's."""

    def packed(self, kind: str, other: str) -> float:
        """Speed of ``kind`` packed on one GPU with ``other``, relative to alone."""
        ...

    def spread(self, kind: str, gpus: int, extra_nodes: int) -> float:
        """Speed of a gang on ``extra_nodes`` more nodes than it needs, relative to packed."""
        ...


class Pacing:
    """Each running job's partners and speed factor on one cluster (the module docstring)."""

    __slots__ = ("_rack_of", "_type_of", "_widest", "contention", "host", "topology", "typed")

    def __init__(
        self,
        cluster: ClusterView,
        contention: Contention | None,
        host: Host | None,
        *,
        typed: bool,
        topology: Topology | None = None,
    ) -> None:
        self.contention = contention
        self.host = host
        self.topology = topology
        """Racks and their links (None: where a gang runs costs it nothing more)."""
        self._rack_of = cluster.node_racks if topology is not None else {}
        self.typed = typed
        """Some job runs at different speeds on different GPU types."""
        self._type_of = cluster.node_types
        self._widest = cluster.widest_node if cluster.nodes else 1

    def pace(self, active: dict[str, JobState], ran: list[JobState], shared: int) -> list[JobState]:
        """Who shares a GPU with whom, and each running job's resulting speed factor.

        Returns the running jobs. Only those and the jobs that ran at the last call
        (``ran``: what it returned, less the jobs that ended since) are touched:
        every other job kept the neutral values (no partners, full speed) that the
        last call left it, as who runs changes only between calls. ``shared``: how many
        GPUs run more than one job (``Occupancy.shared``).
        """
        running = [s for s in active.values() if s.running]
        for state in ran:
            state.partners, state.factor, state.type_factor = (), 1.0, 1.0
            state.held_types = ()
        partners = (
            co_runners({s.job.id: s.devices[: s.workers] for s in running})
            if shared  # else no GPU runs two jobs: nobody has partners
            else {}
        )
        for state in running:
            state.partners, state.factor = partners.get(state.job.id, ()), 1.0
        if self.typed:
            self._type_speeds(running)
        if self.host is not None:
            self._share_hosts(running, self.host)
        model = self.contention
        for state in running:
            kind = state.job.kind
            for other in state.partners:
                other_kind = active[other].job.kind
                if self.host is not None and (model is None or kind is None):
                    continue  # the host charges for the core the two share
                if model is None or kind is None or other_kind is None:
                    # Nothing measured for this pair: packing is worth exactly a
                    # time-share, no gain and no loss.
                    state.factor *= 0.5
                else:
                    state.factor *= model.packed(kind, other_kind)
            if model is None or kind is None:
                continue
            gpus = state.workers
            nodes = len({d.node for d in state.devices[:gpus]})
            extra = nodes - -(-gpus // self._widest)
            if extra > 0:
                state.factor *= model.spread(kind, gpus, extra)
        if self.topology is not None:
            self._span_racks(running, self.topology)
        for state in running:
            state.pace()
        return running

    def _span_racks(self, running: list[JobState], topology: Topology) -> None:
        """Slow each gang that spans racks by what its sync then costs (``sim.topology``)."""
        rack_of = self._rack_of
        for state in running:
            share = state.job.comm_share
            if share > 0:
                racks = len({rack_of[d.node] for d in state.devices[: state.workers]})
                state.factor *= topology.speed(share, racks)

    def _type_speeds(self, running: list[JobState]) -> None:
        """Each running job's speed on the types it holds: its slowest type's (from its
        tables, where it has one per type: ``sim.typed``)."""
        type_of = self._type_of
        for state in running:
            state.type_factor = 1.0
            job = state.job
            speeds = job.type_speed
            if not speeds:
                continue
            held = [type_of[d.node] for d in state.devices[: state.workers]]
            if job.type_profiles is None:
                state.type_factor = min(speeds.get(t, 1.0) for t in held)
            else:
                state.held_types = tuple(dict.fromkeys(held))
                state.type_factor = table_speed(
                    job.profile,
                    job.type_profiles,
                    speeds,
                    state.held_types,
                    state.placement(),
                    1.0 - state.remaining,
                )
            state.factor = state.type_factor

    @staticmethod
    def _share_hosts(running: list[JobState], host: Host) -> None:
        """Slow every running job to the pace its most crowded resource allows."""
        load: dict[Hashable, int] = {}
        for state in running:
            for d in state.devices[: state.workers]:
                key = host.resource(d)
                load[key] = load.get(key, 0) + 1
        for state in running:
            keys = {host.resource(d) for d in state.devices[: state.workers]}
            shared = min(host.speed(load[k]) for k in keys)
            state.factor *= state.truth.host_speed(shared, state.placement(), 1.0 - state.remaining)
