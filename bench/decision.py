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
it. Target (issue 7): p99 under 100 ms for the default stack. Then the default
on issue 61's cluster (``llm_snapshot``: 18,432 GPUs, a running 16,384-GPU gang
and 400 research jobs). Last, the default on 5,000 jobs that adapt their batch
(``goodput_snapshot``; issue 58's goal: p99 under 1 s, pure Python). Writes
bench/results/decision.json; ``--only-goodput`` times that case alone, into it.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import time
from dataclasses import replace

from _common import results_file, stamp
from ringleader.perf.gradient import GradientReport
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
GOODPUT_REPEAT = 20
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
            taken: list[Device] = []
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


GOODPUT_MODELS = 50
"""Models among ``goodput_snapshot``'s jobs: each job's kin are the others of its model."""


def goodput_snapshot(seed: int = 0, jobs_n: int = JOBS, nodes: int = NODES) -> list[JobView]:
    """``snapshot``'s jobs, each adapting its batch (issue 58): no speed model given, so
    the default fits one online; a gradient report, with noise scales from 100 to
    10,000 examples; elastic up to 64 GPUs; one of ``GOODPUT_MODELS`` models, whose
    jobs' step times at the sizes they run at are each one's kin (``spine.kin``)."""
    rng = random.Random(seed)
    base = snapshot(seed, jobs_n, nodes)
    models = [rng.randrange(GOODPUT_MODELS) for _ in base]
    kin: dict[int, dict[int, Observation]] = {}
    for j, m in zip(base, models, strict=True):
        kin.setdefault(m, {}).update(j.observations)
    jobs = []
    for j, m in zip(base, models, strict=True):
        noise = 10 ** rng.uniform(2, 4)
        jobs.append(
            replace(
                j,
                shape=replace(j.shape, examples_per_epoch=j.shape.examples_per_epoch + m),
                speed=None,
                max_gpus=64,
                gradient=GradientReport(1.0, noise / 128, 128, 128 * 64, 128),
                kin=kin[m],
            )
        )
    return jobs


def goodput_times(repeat: int, keep: str = "none") -> tuple[list[float], list[float]]:
    """``decide_times`` for the default on ``goodput_snapshot``."""
    cluster = ClusterView(tuple(ClusterView.uniform(NODES, 8).nodes))
    jobs = goodput_snapshot()
    policy = policy_named("ringleader")
    decide(policy, jobs, cluster, 0.0)
    times: list[float] = []
    after: list[float] = []
    for r in range(repeat):
        _timed(policy, fresh(jobs, keep), cluster, float(r), times, after)
    return sorted(times), sorted(after)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only-goodput",
        action="store_true",
        help="time only the goodput case, into the file as it stands",
    )
    args = parser.parse_args()
    if args.only_goodput:
        kept: dict[str, object] = json.loads(OUT.read_text())
        _goodput(kept)
        OUT.write_text(json.dumps(kept, indent=2) + "\n")
        return
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
    _goodput(report)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2) + "\n")


def _goodput(report: dict[str, object]) -> None:
    """The default on ``goodput_snapshot``, ``GOODPUT_REPEAT`` decisions on new views
    and as many on views kept as the simulator keeps them."""
    for keep, key in (("none", "ringleader_goodput"), ("all", "ringleader_goodput_views_kept")):
        report[key] = {
            **stamp("python bench/decision.py --only-goodput"),
            "models": GOODPUT_MODELS,
            "repeat": GOODPUT_REPEAT,
            **_figures(*goodput_times(GOODPUT_REPEAT, keep)),
        }
        print(key, report[key], flush=True)


def _figures(times: list[float], after: list[float]) -> dict[str, float]:
    return {
        "median_ms": round(1000 * statistics.median(times), 1),
        "p99_ms": round(1000 * times[min(len(times) - 1, round(0.99 * (len(times) - 1)))], 1),
        "young_gc_after_median_ms": round(1000 * statistics.median(after), 1),
    }


if __name__ == "__main__":
    main()
