"""Scenario ``llm-cluster``: a Llama 3-sized pre-training gang among other jobs, failing.

The cluster: racks of 32 nodes of 8 GPUs. A pre-training gang of 16,384 GPUs
(user ``pretrain``) runs for the whole window, 54 days, the length of the Llama
3 report's snapshot; beside it a mix of research jobs (user ``research``) is
submitted at random times, its sizes and lengths shaped after InternLM's Acme
traces (NSDI'24): most jobs are short evaluations on a node or less, some are
fine-tunes of tens of GPUs, a few are pre-training runs of up to 1,024 GPUs;
sizes drawn so that the mean is Kalos's 26.8 GPUs a job (``ACME_MIX``).

Failures follow ``sim.failures.FailureModel``'s defaults (the Llama 3 report's
rates). The gang's checkpoint is its state, 405B parameters at 14 bytes each
(bf16 weights, fp32 master weights and Adam's two moments), written at the 2
TB/s the report gives for its storage's sustained throughput; its restart
takes ten minutes (a stated guess: the report gives none). Research jobs
checkpoint in a minute and restart in two.

Spare nodes are a policy choice: ``research`` may use only its racks
(``quota``), so the gang always finds a node to replace a failed one in the
racks held back. Each variant changes one thing:

* ``young-daly``: each job checkpoints at Young/Daly's interval for its gang;
* ``every 3 h``: every job checkpoints every three hours of progress;
* ``no spares``: Young/Daly, on a cluster of exactly the gang's nodes (no
  research, no spare rack): the gang waits out each repair.

A second part compares placement rules on a gang-heavy mix (``GangMix``):
topology-blind ``FewestNodes`` against ``FewestRacks``, preferred and required.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace

import numpy as np

from ringleader.perf import EpochsToConverge
from ringleader.policy.catalog import policy_named
from ringleader.policy.model.views import ClusterView, JobShape
from ringleader.policy.pipeline import Policy
from ringleader.policy.place.racks import FewestRacks
from ringleader.sim.engine import Simulator
from ringleader.sim.failures import (
    YOUNG_DALY,
    Checkpointing,
    FailureInputError,
    FailureModel,
    Failures,
    checkpoint_cost_s,
    draw_outages,
)
from ringleader.sim.profiles import TrueProfile
from ringleader.sim.submitted import SimJob
from ringleader.sim.timed import Timed
from ringleader.sim.topology import Topology

DAY = 86_400.0
HOUR = 3_600.0
GANG = "pretrain-405b"
LLAMA3_STATE_BYTES = 405e9 * 14
LLAMA3_WRITE_BYTES_PER_S = 2e12

ACME_MIX: tuple[tuple[str, float, tuple[int, ...], float], ...] = (
    ("evaluation", 0.70, (1, 2, 4, 8), 0.5),
    ("fine-tune", 0.27, (16, 32, 64), 6.0),
    ("pre-training", 0.03, (128, 256, 512, 1024), 24.0),
)
"""Research job kinds: share of jobs, GPU counts (equally likely), median hours
(log-normal, sigma 1). Mean GPUs a job: 0.7 x 3.75 + 0.27 x 37.3 + 0.03 x 480 = 27.1,
near Kalos's 26.8; the largest, 1,024, is Kalos's largest."""


@dataclass(frozen=True, slots=True)
class LlmCluster:
    """The scenario's cluster and workload (the defaults are the module docstring's)."""

    gang_gpus: int = 16_384
    gpus_per_node: int = 8
    nodes_per_rack: int = 32
    spare_racks: int = 2
    research_racks: int = 6
    days: float = 54.0
    research_jobs: int = 400
    gang_restart_s: float = 600.0
    gang_checkpoint_s: float = checkpoint_cost_s(LLAMA3_STATE_BYTES, LLAMA3_WRITE_BYTES_PER_S)
    research_checkpoint_s: float = 60.0
    research_restart_s: float = 120.0
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("gang_gpus", "gpus_per_node", "nodes_per_rack", "research_jobs"):
            value = getattr(self, name)
            if not (isinstance(value, int) and value >= (0 if name == "research_jobs" else 1)):
                raise FailureInputError(f"{name}: {value!r} must be a whole number >= 1")
        for name in ("spare_racks", "research_racks"):
            value = getattr(self, name)
            if not (isinstance(value, int) and value >= 0):
                raise FailureInputError(f"{name}: {value!r} must be a whole number >= 0")
        for name in (
            "days",
            "gang_restart_s",
            "gang_checkpoint_s",
            "research_checkpoint_s",
            "research_restart_s",
        ):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise FailureInputError(f"{name}: {value!r} must be a finite number >= 0")
        rack = self.gpus_per_node * self.nodes_per_rack
        if self.gang_gpus % rack:
            raise FailureInputError(
                f"gang_gpus: {self.gang_gpus} is not a whole number of racks of {rack} GPUs "
                "(nodes_per_rack x gpus_per_node)"
            )
        largest = max(g for _, _, sizes, _ in ACME_MIX for g in sizes)
        if self.research_jobs and self.research_racks * rack < largest:
            raise FailureInputError(
                f"research_racks: {self.research_racks} racks of {rack} GPUs cannot hold the "
                f"mix's largest job ({largest} GPUs); give at least {math.ceil(largest / rack)}"
            )

    @property
    def gang_racks(self) -> int:
        return self.gang_gpus // (self.gpus_per_node * self.nodes_per_rack)

    def cluster(self, *, spares: bool = True) -> ClusterView:
        racks = self.gang_racks + (self.spare_racks + self.research_racks if spares else 0)
        return ClusterView.uniform(
            racks * self.nodes_per_rack, self.gpus_per_node, self.nodes_per_rack
        )

    @property
    def research_gpus(self) -> int:
        return self.research_racks * self.nodes_per_rack * self.gpus_per_node


@dataclass(frozen=True, slots=True)
class Variant:
    name: str
    rule: str | float = YOUNG_DALY
    spares: bool = True


VARIANTS = (
    Variant("young-daly"),
    Variant("every 3 h", rule=3 * HOUR),
    Variant("no spares", spares=False),
)


def gang(gpus: int, hours: float, job_id: str, at: float, user: str, restart_s: float) -> SimJob:
    """A job of exactly ``gpus`` GPUs that needs ``hours`` of running at that size."""
    shape = JobShape(examples_per_epoch=gpus * 3600, batch_per_worker=1, grad_bytes=1e6)
    # Two sizes, so its profile's model fits; it only ever runs at ``gpus``.
    steps = {gpus: 1.0, 2 * gpus: 0.55}
    profile = TrueProfile(f"gang-{gpus}", shape, steps, EpochsToConverge.constant(hours))
    return SimJob(
        job_id, at, profile, max_gpus=gpus, min_gpus=gpus, requested_gpus=gpus,
        elastic=False, startup_s=restart_s, restart_s=restart_s, user=user,
    )  # fmt: skip


def research_mix(setup: LlmCluster) -> list[SimJob]:
    """``setup.research_jobs`` jobs of ``ACME_MIX``, submitted uniformly over the window."""
    rng = np.random.default_rng(setup.seed)
    shares = np.asarray([share for _, share, _, _ in ACME_MIX])
    jobs = []
    for i in range(setup.research_jobs):
        kind, _, sizes, median = ACME_MIX[int(rng.choice(len(ACME_MIX), p=shares / shares.sum()))]
        gpus = int(rng.choice(sizes))
        hours = float(median * math.exp(rng.normal(0.0, 1.0)))
        at = float(rng.uniform(0.0, setup.days * DAY))
        jobs.append(gang(gpus, hours, f"{kind}-{i}", at, "research", setup.research_restart_s))
    return jobs


def run_variant(
    setup: LlmCluster, variant: Variant, *, model: FailureModel | None = None
) -> dict[str, object]:
    """One run: the gang's interruptions and ETTR, and where every GPU-hour went
    (``model``: the failure rates; Llama 3's by default)."""
    cluster = setup.cluster(spares=variant.spares)
    until = setup.days * DAY
    jobs = [gang(setup.gang_gpus, until / HOUR, GANG, 0.0, "pretrain", setup.gang_restart_s)]
    if variant.spares:
        jobs += research_mix(setup)
    model = model or FailureModel()
    outages = draw_outages(model, cluster, until, seed=setup.seed)
    rule = Checkpointing(variant.rule, setup.research_checkpoint_s)
    failures = Failures(
        outages, cluster, model=model, checkpointing=rule, cost_s={GANG: setup.gang_checkpoint_s}
    )
    quotas = {"research": setup.research_gpus} if variant.spares else None
    timed = Timed(policy_named("ringleader"))
    sim = Simulator(
        timed,
        cluster,
        jobs,
        failures=failures,
        until=until,
        round_s=None,
        quotas=quotas,
    )
    result = sim.run()
    big = failures.ledgers[GANG]
    nodes = setup.gang_gpus // setup.gpus_per_node
    interval = rule.interval_s(setup.gang_checkpoint_s, model, setup.gang_gpus, nodes)
    research = [r.jct for r in result.records if r.id != GANG and r.jct is not None]
    whole = failures.cluster_ledger()
    return {
        "variant": variant.name,
        "gpus": cluster.capacity,
        "gang_interruptions": big.interruptions,
        "gang_by_cause": dict(big.by_cause),
        "gang_ettr": round(big.ettr(until), 4),
        "gang_checkpoint_interval_s": round(interval, 1),
        "gang_lost_h": {c: round(v / HOUR, 1) for c, v in big.lost_s.items()},
        "cluster_ettr": round(whole.ettr, 4),
        "cluster_lost_gpu_h": {c: round(v) for c, v in whole.lost_gpu_h.items()},
        "research_finished": len(research),
        "research_avg_jct_h": round(sum(research) / len(research) / HOUR if research else 0.0, 2),
        "decisions": len(timed.seconds),
        "decision_p50_ms": round(timed.quantile_ms(0.5), 1),
        "decision_p99_ms": round(timed.quantile_ms(0.99), 1),
        "wall_s": round(result.wall_s, 1),
    }


def run_llm_cluster(
    setup: LlmCluster,
    variants: Sequence[Variant] = VARIANTS,
    *,
    processes: int | None = None,
    on_done: Callable[[dict[str, object]], None] | None = None,
) -> list[dict[str, object]]:
    """Every variant, in parallel where ``processes`` allows; rows in ``variants``'
    order."""
    with ProcessPoolExecutor(processes) as pool:
        futures = [pool.submit(run_variant, setup, v) for v in variants]
        rows = []
        for future in futures:
            row = future.result()
            if on_done is not None:
                on_done(row)
            rows.append(row)
    return rows


@dataclass(frozen=True, slots=True)
class GangMix:
    """The scenario's placement comparison: gangs of 64 to 1,024 GPUs on racks of 256.

    Every job spends ``comm_share`` of its step synchronising within a rack and four
    times that across racks (``Topology``'s 400 and 100 Gb/s a GPU): spanning two
    racks makes a step 1.9 times as long. Submitted as a Poisson stream at ``load``
    (GPU-hours asked over GPU-hours the cluster has over the arrival span).
    """

    racks: int = 16
    nodes_per_rack: int = 32
    gpus_per_node: int = 8
    jobs: int = 120
    load: float = 0.8
    comm_share: float = 0.3
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("racks", "nodes_per_rack", "gpus_per_node", "jobs"):
            value = getattr(self, name)
            if not (isinstance(value, int) and value >= 1):
                raise FailureInputError(f"{name}: {value!r} must be a whole number >= 1")
        if not (math.isfinite(self.load) and self.load > 0):
            raise FailureInputError(f"load: {self.load!r} must be a finite number > 0")
        if not 0 <= self.comm_share < 1:
            raise FailureInputError(f"comm_share: {self.comm_share!r} must be in [0, 1)")
        if max(GANG_SIZES) > self.racks * self.nodes_per_rack * self.gpus_per_node:
            raise FailureInputError(
                f"racks: {self.racks} racks cannot hold the mix's largest gang "
                f"({max(GANG_SIZES)} GPUs)"
            )

    def cluster(self) -> ClusterView:
        return ClusterView.uniform(
            self.racks * self.nodes_per_rack, self.gpus_per_node, self.nodes_per_rack
        )

    def gangs(self) -> list[SimJob]:
        rng = np.random.default_rng(self.seed)
        sizes = rng.choice(GANG_SIZES, self.jobs)
        hours = 6.0 * np.exp(rng.normal(0.0, 1.0, self.jobs))
        capacity = self.cluster().capacity
        span = float((sizes * hours).sum()) / (capacity * self.load) * HOUR
        times = np.sort(rng.uniform(0.0, span, self.jobs))
        return [
            replace(
                gang(int(g), float(h), f"gang-{i}", float(t), "", 120.0),
                comm_share=self.comm_share,
            )
            for i, (g, h, t) in enumerate(zip(sizes, hours, times, strict=True))
        ]


GANG_SIZES = (64, 128, 256, 512, 1024)
PLACEMENTS = ("fewest nodes (blind)", "racks preferred", "racks required")


def run_placement(mix: GangMix, placement: str) -> dict[str, object]:
    """The gang mix under the default with one placement rule (``PLACEMENTS``): its
    average JCT and makespan."""
    default = policy_named("ringleader")
    assert isinstance(default, Policy)
    rule = {
        PLACEMENTS[0]: default.place,
        PLACEMENTS[1]: FewestRacks(),
        PLACEMENTS[2]: FewestRacks(required=True),
    }[placement]
    policy = replace(default, place=rule)
    result = Simulator(policy, mix.cluster(), mix.gangs(), round_s=None, topology=Topology()).run()
    return {
        "placement": placement,
        "avg_jct_h": round(result.summary.avg_jct_s / HOUR, 3),
        "makespan_h": round(result.summary.makespan_s / HOUR, 2),
        "finished": result.summary.finished,
        "wall_s": round(result.wall_s, 1),
    }


def run_placements(
    mix: GangMix, seeds: int = 2, *, processes: int | None = None
) -> list[dict[str, object]]:
    """Each placement rule on ``seeds`` draws of the mix: average JCT per rule, mean over
    the seeds, and its ratio to the topology-blind rule's on the same draws."""
    cells = [(replace(mix, seed=mix.seed + s), p) for s in range(seeds) for p in PLACEMENTS]
    with ProcessPoolExecutor(processes) as pool:
        rows = list(pool.map(run_placement, *zip(*cells, strict=True)))
    blind = {
        i // len(PLACEMENTS): r["avg_jct_h"] for i, r in enumerate(rows) if i % len(PLACEMENTS) == 0
    }
    out = []
    for p in PLACEMENTS:
        mine = [(i // len(PLACEMENTS), r) for i, r in enumerate(rows) if r["placement"] == p]
        jct = [float(r["avg_jct_h"]) for _, r in mine]  # type: ignore[arg-type]
        ratio = [float(r["avg_jct_h"]) / float(blind[s]) for s, r in mine]  # type: ignore[arg-type]
        out.append(
            {
                "placement": p,
                "avg_jct_h": round(sum(jct) / len(jct), 2),
                "over_blind": round(sum(ratio) / len(ratio), 4),
                "per_seed_h": jct,
            }
        )
    return out
