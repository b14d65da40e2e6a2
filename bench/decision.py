"""One scheduling decision at scale: 5,000 active jobs on 10,000 GPUs, and a 16k gang.

Builds a snapshot of 5,000 jobs (mixed requests of 1-8 GPUs, elastic, half of
them already placed) on 1,250 nodes × 8 GPUs and times ``Policy.decide`` 50
times for each policy, asked as both bodies ask it (``spine.deciding``), each
time on new view objects (a body's views after an event); the default also
with the waiting jobs' views kept, as both bodies keep them, and with every
view kept, a running job's progress moved on in place, as the simulator keeps
them. Those decide about a snapshot on which no plan was carried out, so each
places the waiting half anew; ``*_after_one_event`` carries each plan out and
times the decision after one event (a finish and an arrival), as a body meets
it. Target (issue 7): p99 under 100 ms for the default stack. Last, the default
on issue 61's cluster (``llm_snapshot``: 18,432 GPUs, a running 16,384-GPU gang
and 400 research jobs). Writes bench/results/decision.json.
"""

from __future__ import annotations

import gc
import json
import random
import statistics
import time
from dataclasses import replace

from _common import results_file, stamp
from ringleader.policy import ClusterView, JobView, Plan, policy_named
from ringleader.policy.model.plan import Decider
from ringleader.policy.model.views import Device, Observation
from ringleader.sim.profiles import RESNET110_K40
from ringleader.spine.deciding import decide
from ringleader.spine.views import progress_view

OUT = results_file("decision")
JOBS, NODES, REPEAT = 5_000, 1_250, 50
LLM_NODES, LLM_GANG, LLM_JOBS = 2_304, 16_384, 400
"""Issue 61's cluster: 72 racks of 32 nodes of 8 GPUs, a 16k gang and a research mix."""
SETTLE = 10
"""Decisions, at most, for a snapshot's plans to stop moving jobs (``after_one_event_times``)."""


def snapshot(seed: int = 0, jobs_n: int = JOBS, nodes: int = NODES) -> list[JobView]:
    """``jobs_n`` jobs of 1-8 GPUs, every other one placed while ``nodes`` of 8 GPUs last."""
    rng = random.Random(seed)
    p = RESNET110_K40
    jobs: list[JobView] = []
    node, slot = 0, 0
    for i in range(jobs_n):
        want = rng.choice((1, 1, 1, 2, 4, 8))
        devices: tuple[Device, ...] = ()
        if i % 2 == 0 and node < nodes:
            if slot + want > 8:
                node, slot = node + 1, 0
            if node < nodes:
                name = f"node{node:0{len(str(nodes - 1))}d}"  # as ClusterView.uniform names it
                devices = tuple(Device(name, slot + k) for k in range(want))
                slot += want
        observations = {want: Observation(p.step_time(want), 60.0, 128)} if devices else {}
        jobs.append(
            JobView(
                id=f"job{i:05d}",
                submitted_at=float(i),
                shape=p.shape,
                epochs=p.epochs.scaled(rng.uniform(0.1, 10)),
                remaining_fraction=rng.uniform(0.05, 1.0),
                max_gpus=want,
                requested_gpus=want,
                devices=devices,
                workers=len(devices),
                speed=p.speed_model,
                observations=observations,
                attained_gpu_s=rng.uniform(0, 100_000) if devices else 0.0,
            )
        )
    return jobs


def fresh(jobs: list[JobView], keep: str = "none") -> list[JobView]:
    """The views a body hands the policy after an event. ``none``: new objects for
    every job. ``waiting``: a waiting job's is the same object again (both bodies keep
    it while its row is unchanged), and the policy takes what it worked out for it
    last time (``LastCandidates``). ``all``: a running job's too, its progress moved
    on in place, as the simulator does (``spine.views.progress_view``)."""
    if keep == "all":
        for j in jobs:
            if j.workers:
                progress_view(j, j.remaining_fraction * 0.999, j.attained_gpu_s + 60.0, None)
        return jobs
    return [j if keep == "waiting" and not j.workers else replace(j) for j in jobs]


def decide_times(
    name: str, jobs_n: int, nodes: int, repeat: int, keep: str = "none"
) -> tuple[list[float], list[float]]:
    """Seconds of ``repeat`` decisions of policy ``name`` on ``snapshot(0, jobs_n, nodes)``,
    each on ``fresh`` views (made before the clock starts), asked as both bodies ask
    (``spine.deciding.decide``: the garbage collector paused); and, apart, the
    seconds of the young collection each one leaves for after it."""
    cluster = ClusterView(tuple(ClusterView.uniform(nodes, 8).nodes))
    jobs = snapshot(0, jobs_n, nodes)
    policy = policy_named(name)
    decide(policy, jobs, cluster, 0.0)  # warm the memo of fitted models
    times: list[float] = []
    after: list[float] = []
    for r in range(repeat):
        _timed(policy, fresh(jobs, keep), cluster, float(r), times, after)
    return sorted(times), sorted(after)


def _timed(
    policy: Decider,
    views: list[JobView],
    cluster: ClusterView,
    now: float,
    times: list[float],
    after: list[float],
) -> Plan:
    """One decision as a body asks it: its seconds to ``times``, and those of the young
    collection it leaves for after it to ``after``."""
    started = time.perf_counter()
    plan = decide(policy, views, cluster, now)
    decided = time.perf_counter()
    gc.collect(1)
    times.append(decided - started)
    after.append(time.perf_counter() - decided)
    return plan


def after_one_event_times(
    name: str, jobs_n: int, nodes: int, repeat: int
) -> tuple[list[float], list[float]]:
    """Seconds of ``repeat`` decisions each one event after the last, as a body asks.

    ``decide_times`` asks again and again about a snapshot no plan was carried out
    on, so every decision places the waiting half anew. Here each plan is carried
    out (the views of the jobs it moved are made again), the state is let settle,
    and then each timed decision follows one event: a running job finishes and a
    new one arrives, every other view kept with its progress moved on.
    """
    cluster = ClusterView(tuple(ClusterView.uniform(nodes, 8).nodes))
    jobs = {j.id: j for j in snapshot(0, jobs_n, nodes)}
    arrivals = snapshot(1, repeat, nodes)
    policy = policy_named(name)

    def carry_out(plan: Plan, now: float) -> int:
        """The plan's moves as a body makes them: a moved job's view made again, and
        ``state_since`` moved on where the job starts or stops running (the simulator's
        rule), which time-slicing's turns read."""
        moved = 0
        for job_id, view in list(jobs.items()):
            a = plan.of(job_id)
            if (a.devices, a.workers, a.suspended) != (view.devices, view.workers, view.suspended):
                running = a.workers > 0 and not a.suspended
                since = view.state_since if running == view.running else now
                jobs[job_id] = replace(
                    view,
                    devices=a.devices,
                    workers=a.workers,
                    suspended=a.suspended,
                    state_since=since,
                )
                moved += 1
        return moved

    for r in range(SETTLE):
        if not carry_out(decide(policy, list(jobs.values()), cluster, float(r)), float(r)):
            break
    rng = random.Random(0)
    times: list[float] = []
    after: list[float] = []
    for r in range(repeat):
        gone = rng.choice([j for j in jobs.values() if j.workers])
        del jobs[gone.id]
        new = replace(
            arrivals[r],
            id=f"new{r:05d}",
            submitted_at=float(jobs_n + r),
            devices=(),
            workers=0,
            observations={},
        )
        jobs[new.id] = new
        views = fresh(list(jobs.values()), "all")
        now = float(SETTLE + r)
        carry_out(_timed(policy, views, cluster, now, times, after), now)
    return sorted(times), sorted(after)


def llm_snapshot(seed: int = 0) -> tuple[list[JobView], ClusterView]:
    """Issue 61's cluster: a 16,384-GPU gang running on 2,048 of 2,304 nodes (racks of
    32), and 400 research jobs of 1-64 GPUs, every other one placed on the rest."""
    cluster = ClusterView.uniform(LLM_NODES, 8, 32)
    names = [n.name for n in cluster.nodes]
    p = RESNET110_K40
    gang = tuple(Device(names[i // 8], i % 8) for i in range(LLM_GANG))
    jobs = [
        JobView(
            id="pretrain",
            submitted_at=0.0,
            shape=p.shape,
            epochs=p.epochs,
            min_gpus=LLM_GANG,
            max_gpus=LLM_GANG,
            requested_gpus=LLM_GANG,
            elastic=False,
            devices=gang,
            workers=LLM_GANG,
            speed=p.speed_model,
            priority=10,
        )
    ]
    rng = random.Random(seed)
    node, slot = LLM_GANG // 8, 0
    for i in range(LLM_JOBS):
        want = rng.choice((1, 2, 4, 8, 8, 16, 32, 64))
        devices: tuple[Device, ...] = ()
        if i % 2 == 0 and node < LLM_NODES:
            taken = []
            while len(taken) < want and node < LLM_NODES:
                taken.append(Device(names[node], slot))
                node, slot = (node + 1, 0) if slot == 7 else (node, slot + 1)
            devices = tuple(taken) if len(taken) == want else ()
        jobs.append(
            JobView(
                id=f"research{i:04d}",
                submitted_at=float(i + 1),
                shape=p.shape,
                epochs=p.epochs.scaled(rng.uniform(0.1, 10)),
                min_gpus=want,
                max_gpus=want,
                requested_gpus=want,
                elastic=False,
                devices=devices,
                workers=len(devices),
                speed=p.speed_model,
                attained_gpu_s=rng.uniform(0, 100_000) if devices else 0.0,
            )
        )
    return jobs, cluster


def llm_times(repeat: int) -> tuple[list[float], list[float]]:
    """``decide_times`` for the default on ``llm_snapshot``."""
    jobs, cluster = llm_snapshot()
    policy = policy_named("ringleader")
    decide(policy, jobs, cluster, 0.0)
    times: list[float] = []
    after: list[float] = []
    for r in range(repeat):
        _timed(policy, fresh(jobs), cluster, float(r), times, after)
    return sorted(times), sorted(after)


def main() -> None:
    report: dict[str, object] = {
        **stamp("python bench/decision.py"),
        "jobs": JOBS,
        "gpus": NODES * 8,
        "repeat": REPEAT,
    }
    for name in ("ringleader", "tiresias", "precompute", "fifo"):
        report[name] = _figures(*decide_times(name, JOBS, NODES, REPEAT))
        print(name, report[name], flush=True)
    for keep in ("waiting", "all"):
        key = f"ringleader_{keep}_views_kept"
        report[key] = _figures(*decide_times("ringleader", JOBS, NODES, REPEAT, keep))
        print(key, report[key], flush=True)
    for name in ("ringleader", "fifo"):
        key = f"{name}_after_one_event"
        report[key] = _figures(*after_one_event_times(name, JOBS, NODES, REPEAT))
        print(key, report[key], flush=True)
    key = "ringleader_llm_cluster_16k_gang"
    report[key] = {
        "gpus": LLM_NODES * 8,
        "jobs": LLM_JOBS + 1,
        **_figures(*llm_times(REPEAT)),
    }
    print(key, report[key], flush=True)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2) + "\n")


def _figures(times: list[float], after: list[float]) -> dict[str, float]:
    return {
        "median_ms": round(1000 * statistics.median(times), 1),
        "p99_ms": round(1000 * times[min(len(times) - 1, round(0.99 * (len(times) - 1)))], 1),
        "young_gc_after_median_ms": round(1000 * statistics.median(after), 1),
    }


if __name__ == "__main__":
    main()
