"""Policies by name: what a config file, the CLI and scenarios refer to."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ringleader.policy.allocator import Doubling, FixedSize, OptimusGreedy
from ringleader.policy.baselines import LasDoubling, SRTFOracle, Tiresias
from ringleader.policy.plan import Decider
from ringleader.policy.profiling import Exploratory, Online, Precompute
from ringleader.policy.sharing import Sharing
from ringleader.policy.stack import Policy

_BUILDERS: dict[str, tuple[str, Callable[[], Decider]]] = {
    "precompute": (
        "doubling heuristic, speed models known on arrival",
        lambda: Policy("precompute", Doubling(), Precompute()),
    ),
    "exploratory": (
        "doubling heuristic, each new job probed 2.5 min at 1/2/4/8 GPUs first",
        lambda: Policy("exploratory", Doubling(), Exploratory()),
    ),
    "elastic": (
        "doubling heuristic, speed models learned online from the job's own reports",
        lambda: Policy("elastic", Doubling(), Online()),
    ),
    "optimus": (
        "Optimus greedy (+1 GPU at a time), speed models known on arrival",
        lambda: Policy("optimus", OptimusGreedy(), Precompute()),
    ),
    "fifo": (
        "every job gets exactly the GPUs it requests, first come first served",
        lambda: Policy("fifo", FixedSize(None)),
    ),
    "ringleader": (
        "least-attained-service queues pick who runs, doubling picks how wide; "
        "models learned online; no durations",
        lambda: Policy("ringleader", LasDoubling(thresholds_gpu_s=(36_000.0,)), Online()),
    ),
    "tiresias": (
        "Tiresias: discretised 2D least-attained-service queues, preemptive, no durations",
        lambda: Policy("tiresias", Tiresias()),
    ),
    "srtf-oracle": (
        "ORACLE: shortest true remaining time first, preemptive (a bound, not a scheduler)",
        lambda: Policy("srtf-oracle", SRTFOracle(), Precompute()),
    ),
    "gandiva": (
        "Gandiva: time-slicing in 60 s quanta, packing kept only if it helps, migration, "
        "grow-shrink, priorities",
        lambda: Sharing("gandiva"),
    ),
    "time-slicing": (
        "Gandiva without packing: time-slicing, migration, grow-shrink, priorities",
        lambda: Sharing("time-slicing", packing=False),
    ),
    "no-sharing": (
        "exclusive GPUs, first come first served with backfill (Gandiva's baseline)",
        lambda: Sharing(
            "no-sharing", time_slicing=False, packing=False, migration=False, grow_shrink=False
        ),
    ),
    "one": ("every job runs on 1 GPU, FIFO", lambda: Policy("one", FixedSize(1))),
    "two": ("every job runs on 2 GPUs, FIFO", lambda: Policy("two", FixedSize(2))),
    "four": ("every job runs on 4 GPUs, FIFO", lambda: Policy("four", FixedSize(4))),
    "eight": ("every job runs on 8 GPUs, FIFO", lambda: Policy("eight", FixedSize(8))),
}


class UnknownPolicyError(KeyError):
    def __str__(self) -> str:
        return f"unknown policy {self.args[0]!r}; choose one of: {', '.join(POLICY_NAMES)}"


POLICY_NAMES: tuple[str, ...] = tuple(_BUILDERS)


def describe(name: str) -> str:
    return _BUILDERS[name][0]


class SettingNotUsed(ValueError):
    """A setting given for a policy that has no such knob; says which and who has it."""


def policy_from_config(
    name: str,
    probe_window_s: float | None = None,
    quantum_s: float | None = None,
    thresholds_gpu_s: tuple[float, ...] | None = None,
    *,
    strict: bool = False,
) -> Decider:
    """A named policy, with the exploratory probe window, the sharing quantum or the
    least-attained-service queue thresholds overridden. ``strict``: a setting the
    policy has no use for is an error (``SettingNotUsed``), not ignored."""
    policy = policy_named(name)
    if thresholds_gpu_s is not None:
        if isinstance(policy, Policy) and isinstance(policy.allocator, Tiresias | LasDoubling):
            queues = replace(policy.allocator, thresholds_gpu_s=thresholds_gpu_s)
            policy = replace(policy, allocator=queues)
        elif strict:
            raise SettingNotUsed(
                f"policy {name!r} has no attained-service queues (tiresias and ringleader do)"
            )
    if quantum_s is not None:
        if isinstance(policy, Sharing):
            return replace(policy, quantum_s=quantum_s, trial_window_s=0.75 * quantum_s)
        if strict:
            raise SettingNotUsed(
                f"policy {name!r} does not time-slice (gandiva and time-slicing do)"
            )
    if (
        probe_window_s is not None
        and isinstance(policy, Policy)
        and isinstance(policy.profiling, Exploratory)
    ):
        profiling = Exploratory(policy.profiling.probe_sizes, probe_window_s)
        return Policy(policy.name, policy.allocator, profiling)
    return policy


def policy_named(name: str) -> Decider:
    """The policy registered under ``name``; raises ``UnknownPolicyError`` otherwise."""
    try:
        return _BUILDERS[name][1]()
    except KeyError:
        raise UnknownPolicyError(name) from None
