"""What a policy needs from the body that runs it, declared, not discovered.

A body cannot serve every policy: only a simulator knows a job's true speed
or remaining time; only a body with a ``tc`` agent can set traffic priority.
Each policy says what it relies on, so a body can supply it, adapt it, or
refuse it at start-up with the reason — never accept jobs and then fail at
the first decision.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Needs:
    true_model: bool = False
    """Each job's speed model on arrival. The simulator hands over the true
    one (an oracle of speed, as the seed's precomputed profiling assumes);
    the runtime supplies a measured one from a short profiling phase."""
    true_remaining: bool = False
    """Each job's true remaining time: an oracle only a simulator has."""
    speed_model: bool = False
    """A speed model at all (given, probed or learned online)."""
    profiling: bool = False
    """Jobs run probes at several sizes before they are sized."""
    time_slicing: bool = False
    """Jobs are suspended at a minibatch boundary and resumed on the same GPUs."""
    packing: bool = False
    """Two jobs run on one GPU at once."""
    migration: bool = False
    """A job is checkpointed, stopped and relaunched on other GPUs."""
    traffic: bool = False
    """Per-job traffic priority on a host's NIC (TensorLights)."""

    @property
    def oracle(self) -> bool:
        """Whether the policy is given something no real cluster knows."""
        return self.true_model or self.true_remaining

    def describe(self) -> str:
        """A short list of the needs, for ``ringleader policies``."""
        names = [
            name.replace("_", "-")
            for name in (
                "true_model",
                "true_remaining",
                "profiling",
                "time_slicing",
                "packing",
                "migration",
                "traffic",
            )
            if getattr(self, name)
        ]
        if self.speed_model and not (self.true_model or self.profiling):
            names.insert(0, "online-model")
        return ", ".join(names) or "-"
