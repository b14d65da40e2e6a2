"""GPU types: the cluster model, placement, the simulator's pace, and the typed runtime."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ringleader.perf.epochs import EpochsToConverge
from ringleader.perf.gpu_types import TYPE_FACTORS, gavel_type_speeds, type_speeds
from ringleader.policy.catalog import policy_named, with_types
from ringleader.policy.model.views import ClusterView, Device, JobShape, JobView
from ringleader.policy.place.fewest_nodes import FewestNodes, place
from ringleader.policy.place.type_aware import TypeAware
from ringleader.runtime.state.spec import SpecError, parse_spec
from ringleader.runtime.workers.gpus import (
    GpuLayout,
    GpuSpecError,
    parse_gpus,
    type_name,
    type_step_times,
)
from ringleader.sim.engine import Simulator
from ringleader.sim.profiles import RESNET110_K40
from ringleader.sim.submitted import SimJob
from tests.live_server import LiveServer, run_cli, wait_for

MIXED = ClusterView.typed({"v100": (1, 4), "k80": (1, 4)})
SHAPE = JobShape(50_000, 128, 6.9e6)


def view(job_id: str, gpus: int = 1, **fields: object) -> JobView:
    defaults: dict[str, object] = {
        "submitted_at": 0.0,
        "shape": SHAPE,
        "epochs": EpochsToConverge.constant(1.0),
        "requested_gpus": gpus,
        "max_gpus": gpus,
        "elastic": False,
    }
    return JobView(id=job_id, **(defaults | fields))  # type: ignore[arg-type]


def types_of(devices: tuple[Device, ...]) -> set[str]:
    return {MIXED.type_of(d.node) for d in devices}


# --- the cluster model and placement -------------------------------------------------


def test_a_typed_cluster_names_its_types_and_capacity_per_type() -> None:
    assert MIXED.types == ("v100", "k80")
    assert MIXED.heterogeneous
    assert (MIXED.capacity_of("v100"), MIXED.capacity_of("k80"), MIXED.capacity) == (4, 4, 8)
    assert ClusterView.uniform(2, 4).types == ("",)
    assert not ClusterView.uniform(2, 4).heterogeneous


@pytest.mark.parametrize("stage", [FewestNodes(), TypeAware()])
def test_every_place_stage_honours_a_jobs_gpu_types(stage: object) -> None:
    jobs = [view("a", 3, gpu_types=("k80",)), view("b", 2, gpu_types=("v100",))]
    placed = stage.place({"a": 3, "b": 2}, jobs, MIXED)  # type: ignore[attr-defined]
    assert types_of(placed["a"]) == {"k80"}
    assert types_of(placed["b"]) == {"v100"}


def test_a_job_whose_types_are_full_waits_and_the_others_are_sized_again() -> None:
    # Four k80-only jobs of 2 GPUs: only two fit on the k80s. The policy must not
    # crash, and the GPUs counted for the others go to jobs that can use them.
    jobs = [view(f"k{i}", 2, submitted_at=float(i), gpu_types=("k80",)) for i in range(4)]
    jobs.append(view("any", 4, submitted_at=10.0))
    plan = policy_named("fifo").decide(jobs, MIXED, 0.0)
    running = {j for j in ("k0", "k1", "k2", "k3", "any") if plan.of(j).running}
    assert running == {"k0", "k1", "any"}
    assert types_of(plan.of("any").devices) == {"v100"}


def test_type_aware_gives_the_fast_type_to_the_job_that_gains_most_from_it() -> None:
    # Two 1-GPU jobs, one V100 free (the rest held): the one 7x faster on a V100
    # gets it, the one 2x faster takes a K80. Type-agnostic placement ignores it.
    held = view("held", 3, devices=tuple(Device("v100-0", i) for i in (1, 2, 3)), workers=3)
    resnet = view("resnet", type_speed={"v100": 1.0, "k80": 0.14})
    a3c = view("a3c", type_speed={"v100": 1.0, "k80": 0.48}, submitted_at=-1.0)
    counts = {"held": 3, "resnet": 1, "a3c": 1}
    aware = TypeAware().place(counts, [held, a3c, resnet], MIXED)
    assert types_of(aware["resnet"]) == {"v100"}
    assert types_of(aware["a3c"]) == {"k80"}
    agnostic = place(counts, [held, a3c, resnet], MIXED)
    assert types_of(agnostic["a3c"]) == {"v100"}  # best fit, first submitted: not by speed


def test_a_new_job_swaps_with_a_running_one_that_minds_the_type_less() -> None:
    # The V100s are all held by a job that runs nearly as fast on a K80; a new job
    # that is 7x slower on a K80 takes its GPUs, and it moves to the K80s.
    v100s = tuple(Device("v100-0", i) for i in range(4))
    easy = view(
        "easy",
        4,
        devices=v100s,
        workers=4,
        type_speed={"v100": 1.0, "k80": 0.9},
        remaining_fraction=0.5,
        attained_gpu_s=4000.0,
    )
    hard = view("hard", 4, type_speed={"v100": 1.0, "k80": 0.14})
    placed = TypeAware().place({"easy": 4, "hard": 4}, [easy, hard], MIXED)
    assert types_of(placed["hard"]) == {"v100"}
    assert types_of(placed["easy"]) == {"k80"}
    # Without a gain past the margin, the running job keeps its GPUs.
    same = view("same", 4, type_speed={"v100": 1.0, "k80": 0.9})
    kept = TypeAware().place({"easy": 4, "same": 4}, [easy, same], MIXED)
    assert kept["easy"] == v100s


def test_a_running_job_moves_to_a_faster_type_only_when_the_move_pays() -> None:
    k80s = tuple(Device("k80-0", i) for i in range(2))
    common = {"devices": k80s, "workers": 2, "type_speed": {"v100": 1.0, "k80": 0.25}}
    long_left = view("long", 2, remaining_fraction=0.9, attained_gpu_s=2 * 600.0, **common)
    nearly_done = view("done", 2, remaining_fraction=0.001, attained_gpu_s=2 * 600.0, **common)
    moved = TypeAware().place({"long": 2}, [long_left], MIXED)
    assert types_of(moved["long"]) == {"v100"}
    stays = TypeAware().place({"done": 2}, [nearly_done], MIXED)
    assert stays["done"] == k80s


def test_on_one_type_the_type_aware_stage_places_exactly_as_fewest_nodes() -> None:
    cluster = ClusterView.uniform(3, 4)
    jobs = [view(f"j{i}", 1 + i % 4, submitted_at=float(i)) for i in range(5)]
    counts = {j.id: j.requested_gpus for j in jobs}
    assert TypeAware().place(counts, jobs, cluster) == place(counts, jobs, cluster)


def test_with_types_names_the_agnostic_variant() -> None:
    agnostic = with_types(policy_named("tiresias"), False)
    assert agnostic.name == "tiresias-agnostic"
    assert isinstance(agnostic.place, FewestNodes)  # type: ignore[attr-defined]
    assert with_types(agnostic, True).name == "tiresias"


# --- the simulator -------------------------------------------------------------------


def _alone(cluster: ClusterView, gpus: int, speeds: dict[str, float]) -> float:
    job = SimJob(
        "j",
        0.0,
        RESNET110_K40,
        max_gpus=gpus,
        requested_gpus=gpus,
        elastic=False,
        work_scale=0.01,
        type_speed=speeds,
    )
    result = Simulator(
        with_types(policy_named("fifo"), False), cluster, [job], restart_delay_s=0.0
    ).run()
    finished = result.records[0].finished_at
    assert finished is not None
    return finished


def test_a_gang_on_mixed_types_runs_at_its_slowest_types_pace() -> None:
    speeds = {"v100": 1.0, "k80": 0.25}
    on_v100 = _alone(ClusterView.typed({"v100": (1, 2)}), 2, speeds)
    on_k80 = _alone(ClusterView.typed({"k80": (1, 2)}), 2, speeds)
    mixed = _alone(ClusterView.typed({"v100": (1, 1), "k80": (1, 1)}), 2, speeds)
    assert on_k80 == pytest.approx(4 * on_v100)
    assert mixed == pytest.approx(on_k80)


# --- speed knowledge -----------------------------------------------------------------


def test_gavels_table_gives_each_job_type_its_own_ratio_between_types() -> None:
    resnet = gavel_type_speeds("ResNet-50 (batch size 64)")
    rec = gavel_type_speeds("Recommendation (batch size 2048)")
    assert resnet["v100"] == 1.0 and resnet["k80"] < 0.2
    assert rec["p100"] > 1.0  # faster on the older card: measured, not assumed
    assert TYPE_FACTORS["v100"] == 1.0 and TYPE_FACTORS["k80"] < TYPE_FACTORS["p100"] < 1.0


def test_a_type_never_tried_is_estimated_from_the_others_and_marked() -> None:
    speeds = type_speeds({"k80": 0.4}, ("v100", "p100", "k80"))
    assert speeds.estimated == {"v100", "p100"}
    assert speeds.speeds["k80"] == 1.0
    ratio = TYPE_FACTORS["v100"] / TYPE_FACTORS["k80"]
    assert speeds.speeds["v100"] == pytest.approx(ratio)
    measured = type_speeds({"k80": 0.4, "v100": 0.1}, ("v100", "k80"))
    assert measured.estimated == frozenset()
    assert measured.speeds == {"v100": 1.0, "k80": pytest.approx(0.25)}


def test_step_times_per_type_are_compared_at_one_world_size() -> None:
    table = {"v100/2": [0.1, 5, 50, 16], "k80/2": [0.3, 5, 50, 16], "k80/1": [0.2, 5, 50, 16]}
    assert type_step_times(table) == {"v100": 0.1, "k80": 0.3}


# --- the runtime's inputs ------------------------------------------------------------


def test_gpus_flag_takes_a_count_or_a_type_mix() -> None:
    assert parse_gpus("4") == GpuLayout.untyped(4)
    layout = parse_gpus("v100:2,k80:1")
    assert [n.name for n in layout.nodes()] == ["local-v100", "local-k80"]
    assert [n.gpu_type for n in layout.nodes()] == ["v100", "k80"]
    assert layout.physical(Device("local-k80", 0)) == 2
    assert parse_gpus("4").nodes()[0].name == "local"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("v100", "TYPE:COUNT"),
        ("v100:two", "TYPE:COUNT"),
        ("V100:2", "lower-case"),
        ("v100:2,v100:1", "twice"),
        ("v100:0", "at least 1"),
        ("0", "within"),
        ("", "empty"),
    ],
)
def test_a_bad_gpus_flag_says_what_to_write(text: str, says: str) -> None:
    with pytest.raises(GpuSpecError, match=says) as err:
        parse_gpus(text)
    assert "--gpus" in str(err.value)


@pytest.mark.parametrize(
    ("product", "name"),
    [
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("Tesla V100-SXM2-16GB", "v100"),
        ("NVIDIA A100-SXM4-80GB", "a100"),
        ("NVIDIA GeForce RTX 4090", "rtx4090"),
        ("NVIDIA L4", "l4"),
        ("Tesla K80", "k80"),
    ],
)
def test_a_cards_product_name_becomes_a_short_type(product: str, name: str) -> None:
    assert type_name(product) == name


def test_a_spec_names_types_the_cluster_has_and_enough_of_them() -> None:
    spec = parse_spec({"name": "a", "command": ["true"], "gpu_type": "k80"}, cluster=MIXED)
    assert spec.gpu_type == ["k80"]
    with pytest.raises(SpecError) as err:
        parse_spec({"name": "a", "command": ["true"], "gpu_type": ["a100"]}, cluster=MIXED)
    assert err.value.problems[0][0] == "gpu_type"
    assert "v100, k80" in err.value.problems[0][1]
    with pytest.raises(SpecError, match="has 4 of type k80"):
        parse_spec(
            {"name": "a", "command": ["true"], "gpus": 5, "gpu_type": ["k80"]}, cluster=MIXED
        )
    with pytest.raises(SpecError, match="twice"):
        parse_spec({"name": "a", "command": ["true"], "gpu_type": ["k80", "k80"]})


# --- the typed runtime, for real -----------------------------------------------------

# Writes six progress lines of 50 ms minibatches, as the job library would.
STEPS = (
    'for i in 1 2 3 4 5 6; do printf \'{"g": %s, "step": %s, "step_time": 0.05, '
    '"world_size": 1, "epoch": 0.1, "batch_per_worker": 16}\\n\' "$RINGLEADER_GENERATION" '
    '"$i" >> "$RINGLEADER_JOB_DIR/progress.jsonl"; sleep 0.3; done'
)


@pytest.mark.slow
def test_typed_virtual_devices_place_by_type_and_keep_step_times_per_type(
    tmp_path: Path,
) -> None:
    from ringleader.runtime.state.store import Store

    live = LiveServer(tmp_path / "state", "v100:1,k80:1").start()  # type: ignore[arg-type]
    try:
        cluster = live.http.get("/cluster").json()
        assert [(n["name"], n["gpu_type"]) for n in cluster["nodes"]] == [
            ("local-v100", "v100"),
            ("local-k80", "k80"),
        ]
        bad = live.http.post(
            "/jobs", json={"name": "bad", "command": ["true"], "gpu_type": ["a100"]}
        )
        assert bad.status_code == 422
        assert "gpu_type" in bad.text
        go = tmp_path / "go"
        wait = f'; while [ ! -e "{go}" ]; do sleep 0.1; done'
        spec = {"name": "on-k80", "command": ["bash", "-c", STEPS + wait], "gpu_type": ["k80"]}
        job = live.http.post("/jobs", json=spec).json()
        seen: dict[str, object] = {}

        def running() -> bool:
            seen.update(live.http.get(f"/jobs/{job['id']}").json())
            return seen["state"] in ("running", "succeeded") and bool(seen.get("devices"))

        wait_for(running, 60, "the k80 job to run")
        assert seen["devices"] == ["local-k80:0"]
        assert seen["gpu_types"] == ["k80"]
        listed = live.http.get("/jobs").json()
        assert listed[0]["gpu_types"] == ["k80"]
        show = run_cli(live.url, "show", job["id"])
        assert "devices: local-k80:0 (k80)" in show.stdout
        go.touch()
        done = live.wait_state(job["id"], {"succeeded"}, timeout=60)
        launched = [e for e in done["events"] if e["kind"] == "launched"]
        assert launched[0]["gpu_types"] == ["k80"]
        speeds = done["type_speeds"]
        assert speeds["k80"]["estimated"] is False
        assert speeds["k80"]["step_time_s"] == pytest.approx(0.05)
        assert speeds["v100"]["estimated"] is True
        assert speeds["v100"]["relative_speed"] > 1.0  # a V100 is typically faster
        shown = run_cli(live.url, "show", job["id"]).stdout
        assert "v100 " in shown and "(estimated)" in shown
    finally:
        live.stop()
    row = Store(live.state_dir / "ringleader.db").get(job["id"])
    assert row is not None
    assert set(row.type_observations) == {"k80/1"}
    mean, _, count, _ = row.type_observations["k80/1"]
    assert mean == pytest.approx(0.05) and count >= 3


# --- workload files and traces -------------------------------------------------------

TYPED_FILE = """
version: 1
cluster:
  types:
    v100: {nodes: 1, gpus_per_node: 4}
    k80: {nodes: 1, gpus_per_node: 4}
models:
  m:
    step_time_s: {1: 0.1, 2: 0.12}
    types:
      k80: {step_time_s: {1: 0.4, 2: 0.48}}
    epochs: 1
    examples_per_epoch: 1000
    batch_per_worker: 10
    grad_bytes: 1.0e6
jobs:
  - {name: a, model: m, gpus: 2, gpu_type: [k80]}
  - {name: b, model: m}
"""


def _load(tmp_path: Path, text: str) -> object:
    from ringleader.sim.workload_file import load_workload

    path = tmp_path / "w.yaml"
    path.write_text(text)
    return load_workload(path)


def test_a_workload_file_names_types_per_node_group_and_step_times_per_type(
    tmp_path: Path,
) -> None:
    workload = _load(tmp_path, TYPED_FILE)
    cluster = workload.cluster  # type: ignore[attr-defined]
    assert cluster.types == ("v100", "k80") and cluster.capacity == 8
    a, b = workload.jobs  # type: ignore[attr-defined]
    assert a.gpu_types == ("k80",) and b.gpu_types == ()
    assert a.type_speed == {"k80": pytest.approx(0.25), "v100": 1.0}


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (("gpu_type: [k80]", "gpu_type: [a100]"), "jobs[0].gpu_type: the cluster has no a100"),
        (("gpus: 2, gpu_type", "gpus: 5, gpu_type"), "has only 4 of type k80"),
        (("k80: {step_time_s: {1: 0.4, 2: 0.48}}", "k80: {step_time_s: {4: 0.5}}"), "in common"),
        (("    k80: {nodes: 1", "    K80: {nodes: 1"), "cluster.types"),
        (("  types:\n    v100", "  nodes: 2\n  types:\n    v100"), "not both"),
    ],
)
def test_a_typed_workload_files_mistakes_name_the_field(
    tmp_path: Path, change: tuple[str, str], says: str
) -> None:
    from ringleader.sim.workload_spec import WorkloadFileError

    text = TYPED_FILE.replace(*change)
    assert text != TYPED_FILE
    with pytest.raises(WorkloadFileError, match=re.escape(says)):
        _load(tmp_path, text)


def test_a_trace_takes_a_type_mix_with_speeds_from_gavels_table() -> None:
    from ringleader.traces.jobs import parse_type_mix, to_sim_jobs, typed_cluster, with_type_speeds
    from ringleader.traces.load import TraceError, TraceJob

    cluster = typed_cluster(48, parse_type_mix("v100:1,k80:2"))
    assert {t: cluster.capacity_of(t) for t in cluster.types} == {"v100": 16, "k80": 32}
    rows = [
        TraceJob("r", 0.0, 1, None, "ResNet-50 (batch size 64)", 1000),
        TraceJob("x", 0.0, 2, 3600.0, None, None),
    ]
    resnet, plain = with_type_speeds(to_sim_jobs(rows), rows, cluster.types)
    measured = gavel_type_speeds("ResNet-50 (batch size 64)")
    assert resnet.type_speed == {"v100": 1.0, "k80": pytest.approx(measured["k80"])}
    assert plain.type_speed["k80"] == pytest.approx(TYPE_FACTORS["k80"])
    for bad in ("a100:1", "v100", "v100:0", "v100:x"):
        with pytest.raises(TraceError, match="--gpu-types"):
            parse_type_mix(bad)


def test_a_ray_nodes_type_comes_from_the_accelerator_resource_ray_reads_from_nvml() -> None:
    pytest.importorskip("ray")
    from ringleader.runtime.workers.executor.ray import node_gpu_type

    assert node_gpu_type({"GPU": 8.0, "accelerator_type:A100": 1.0}) == "a100"
    assert node_gpu_type({"GPU": 4.0, "accelerator_type:H100": 1.0, "CPU": 32.0}) == "h100"
    assert node_gpu_type({"GPU": 1.0}) == ""


def test_type_aware_las_counts_service_in_each_jobs_best_gpus_terms() -> None:
    from ringleader.policy.model.objective import Candidate
    from ringleader.policy.order.queues import LeastAttained

    # Both held GPUs for 2 h; one on a type it runs at a quarter speed.
    fast = view("fast", attained_gpu_s=7200.0, attained_effective_s=7200.0)
    slow = view("slow", attained_gpu_s=7200.0, attained_effective_s=1800.0, submitted_at=1.0)
    order = LeastAttained((3600.0,))
    jobs = [Candidate(fast, None), Candidate(slow, None)]
    assert [c.job.id for c in order.order(jobs, 0.0)] == ["fast", "slow"]  # FIFO: same queue
    effective = LeastAttained((3600.0,), effective=True)
    assert [c.job.id for c in effective.order(jobs, 0.0)] == ["slow", "fast"]
    aware = with_types(policy_named("tiresias"), True)
    assert aware.order.effective  # type: ignore[attr-defined]
    assert not with_types(aware, False).order.effective  # type: ignore[attr-defined]


def test_the_simulator_weighs_attained_service_by_the_type_held() -> None:
    cluster = ClusterView.typed({"k80": (1, 2)})
    job = SimJob(
        "j",
        0.0,
        RESNET110_K40,
        max_gpus=2,
        requested_gpus=2,
        elastic=False,
        work_scale=0.01,
        type_speed={"v100": 1.0, "k80": 0.25},
    )
    seen: list[JobView] = []

    class Watch:
        name = "watch"
        needs = policy_named("fifo").needs

        def decide(self, jobs, cluster, now):  # type: ignore[no-untyped-def]
            seen.extend(jobs)
            return policy_named("fifo").decide(jobs, cluster, now)

    Simulator(Watch(), cluster, [job], restart_delay_s=0.0, round_s=60.0).run()
    last = [v for v in seen if v.attained_gpu_s > 0][-1]
    assert last.attained_effective_s == pytest.approx(0.25 * last.attained_gpu_s)


def test_a_job_waiting_for_its_gpu_type_says_so_though_other_gpus_are_free() -> None:
    from ringleader.spine.reasons import NO_FREE_GPUS, explain

    k80s = tuple(Device("k80-0", i) for i in range(4))
    busy = view("busy", 4, devices=k80s, workers=4, gpu_types=("k80",))
    waiting = view("waits", 1, gpu_types=("k80",), submitted_at=5.0)
    jobs = [busy, waiting]
    plan = with_types(policy_named("fifo"), True).decide(jobs, MIXED, 10.0)
    assert plan.of("busy").running and not plan.of("waits").running
    why = explain(plan, jobs, {}, MIXED.capacity, {}, now=10.0, cluster=MIXED)["waits"]
    assert why.code == NO_FREE_GPUS
    assert "needs 1 k80 GPU(s), 0 free" in why.text


def test_the_runtime_fits_its_speed_model_to_step_times_in_the_fastest_types_terms() -> None:
    from ringleader.policy.model.views import Observation
    from ringleader.runtime.workers.gpus import measured_speeds, observations_in_best_terms

    # 2 workers: 0.1 s steps on V100s for 10 s, 0.4 s steps on K80s for 20 s. In V100
    # terms the K80 steps are 0.1 s too, so the merged profile says 0.1 s, not a mix.
    table = {"v100/2": [0.1, 10.0, 100, 16], "k80/2": [0.4, 20.0, 50, 16]}
    raw = {2: Observation(0.3, 30.0, 16), 4: Observation(0.2, 5.0, 16)}
    merged = observations_in_best_terms(measured_speeds(MIXED, table), table, raw)
    assert merged[2].step_time == pytest.approx(0.1)
    assert merged[2].seconds == pytest.approx(30.0)
    assert merged[4] == raw[4]  # measured only spread over types: kept as it was
    one_type = ClusterView.uniform(1, 4)
    assert observations_in_best_terms(measured_speeds(one_type, table), table, raw) == raw
