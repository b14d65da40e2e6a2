"""Workload files say what a user means, and no file crashes the loader (issue 17, item 4)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ringleader.sim.workload_file import load_workload
from ringleader.sim.workload_spec import WorkloadFileError

MODEL = {
    "step_time_s": {1: 0.2, 2: 0.22, 4: 0.25},
    "epochs": 10,
    "examples_per_epoch": 50_000,
    "batch_per_worker": 64,
    "grad_bytes": 1e8,
}


def _write(tmp_path: Path, data: Any, name: str = "w.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def test_elastic_max_gpus_defaults_to_the_cluster_and_fixed_jobs_to_their_size(
    tmp_path: Path,
) -> None:
    data = {
        "cluster": {"nodes": 4, "gpus_per_node": 8},
        "jobs": [
            {"name": "wide", "model": "resnet110", "gpus": 2},
            {"name": "fixed", "model": "resnet110", "gpus": 2, "elastic": False},
            {"name": "capped", "model": "resnet110", "gpus": 2, "max_gpus": 4},
        ],
    }
    jobs = {j.id: j for j in load_workload(_write(tmp_path, data)).jobs}
    assert jobs["wide"].max_gpus == 32
    assert jobs["fixed"].max_gpus == 2
    assert jobs["capped"].max_gpus == 4


def test_a_model_that_cannot_be_fitted_is_an_error_naming_the_field(tmp_path: Path) -> None:
    # Doubling with the workers and no sample at 1: the fit puts it all in communication.
    bad = {**MODEL, "step_time_s": {4: 0.3, 8: 0.6}}
    data = {
        "cluster": {"nodes": 1, "gpus_per_node": 4},
        "models": {"huge": bad},
        "jobs": [{"name": "a", "model": "huge"}],
    }
    path = _write(tmp_path, data)
    with pytest.raises(WorkloadFileError, match=r"models\.huge\.step_time_s"):
        load_workload(path)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "ringleader",
            "simulate",
            "--workload",
            str(path),
            "--policy",
            "ringleader",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2, out.stderr
    assert "models.huge.step_time_s" in out.stderr and "Traceback" not in out.stderr


# -- the fuzz: files a user might write, and files nobody would -------------------

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=10), st.integers(-3, 9)), inner, max_size=4),
    ),
    max_leaves=12,
)
_sizes = st.one_of(st.integers(-2, 70), _scalars)
_model = st.fixed_dictionaries(
    {
        "step_time_s": st.one_of(
            st.dictionaries(st.integers(-1, 12), st.floats(-1, 100), max_size=4), _values
        ),
        "epochs": st.one_of(st.floats(-1, 1e7), _values),
        "examples_per_epoch": st.one_of(st.integers(-5, 10**11), _scalars),
        "batch_per_worker": st.one_of(st.integers(-5, 10**7), _scalars),
        "grad_bytes": st.one_of(st.floats(-1, 1e14), _scalars),
    },
    optional={"allreduce": st.one_of(st.sampled_from(["ring", "mpich", "nope"]), _scalars)},
)
_job = st.fixed_dictionaries(
    {"model": st.one_of(st.sampled_from(["resnet110", "m0", "missing"]), _scalars)},
    optional={
        "name": st.one_of(st.text(max_size=8), _scalars),
        "gpus": _sizes,
        "min_gpus": _sizes,
        "max_gpus": _sizes,
        "elastic": st.one_of(st.booleans(), _scalars),
        "submit_s": st.one_of(st.floats(-10, 1e10), _scalars),
        "work_scale": st.one_of(st.floats(-1, 1e7), _scalars),
        "user": st.one_of(st.text(max_size=70), _scalars),
        "priority": st.one_of(st.integers(-2000, 2000), _scalars),
        "surprise": _values,
    },
)
_poisson = st.fixed_dictionaries(
    {
        "model": st.sampled_from(["resnet110", "m0"]),
        "count": st.one_of(st.integers(-2, 50), _scalars),
        "mean_gap_s": st.one_of(st.floats(-1, 1e8), _scalars),
    },
    optional={"seed": st.integers(-1, 2**64), "gpus": _sizes, "max_gpus": _sizes},
)
_small = st.integers(1, 12)
_plausible_job = st.fixed_dictionaries(
    {"model": st.sampled_from(["resnet110", "m0"]), "gpus": st.integers(1, 4)},
    optional={
        "min_gpus": st.integers(1, 2),
        "max_gpus": st.integers(1, 40),
        "elastic": st.booleans(),
        "submit_s": st.floats(0, 1e5),
        "work_scale": st.floats(0.01, 10),
    },
)
_plausible = st.fixed_dictionaries(
    {
        "cluster": st.fixed_dictionaries({"nodes": _small, "gpus_per_node": _small}),
        "models": st.just({"m0": MODEL}),
        "jobs": st.lists(_plausible_job, min_size=1, max_size=5).map(
            lambda jobs: [{**j, "name": f"j{i}"} for i, j in enumerate(jobs)]
        ),
    },
    optional={
        "poisson": st.lists(
            st.fixed_dictionaries(
                {
                    "model": st.sampled_from(["resnet110", "m0"]),
                    "count": st.integers(1, 20),
                    "mean_gap_s": st.floats(1, 1e4),
                    "name_prefix": st.just("p"),
                },
                optional={"gpus": st.integers(1, 2), "max_gpus": st.integers(2, 16)},
            ),
            max_size=1,
        ),
        "simulation": st.fixed_dictionaries(
            {}, optional={"restart_delay_s": st.floats(0, 100), "round_s": st.floats(1, 1e4)}
        ),
    },
)
_file = st.one_of(
    _plausible,
    _values,
    st.fixed_dictionaries(
        {
            "cluster": st.one_of(
                st.fixed_dictionaries({"nodes": _sizes, "gpus_per_node": _sizes}), _values
            ),
        },
        optional={
            "version": st.one_of(st.just(1), _scalars),
            "models": st.one_of(st.dictionaries(st.just("m0"), _model, max_size=1), _values),
            "jobs": st.one_of(st.lists(_job, max_size=4), _values),
            "poisson": st.one_of(st.lists(_poisson, max_size=2), _values),
            "users": st.one_of(
                st.dictionaries(
                    st.one_of(st.text(max_size=5), st.sampled_from(["", "u"])),
                    st.one_of(st.fixed_dictionaries({}, optional={"quota_gpus": _sizes}), _values),
                    max_size=2,
                ),
                _values,
            ),
            "simulation": st.one_of(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "restart_delay_s": _sizes,
                        "round_s": _sizes,
                        "user_weights": st.one_of(
                            st.dictionaries(st.text(max_size=5), st.floats(-1, 1e7), max_size=3),
                            _values,
                        ),
                    },
                ),
                _values,
            ),
        },
    ),
)


@settings(
    max_examples=1000,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=_file)
def test_no_workload_file_crashes_the_loader(tmp_path: Path, data: Any) -> None:
    path = tmp_path / "fuzz.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    try:
        workload = load_workload(path)
    except WorkloadFileError as err:
        assert str(err).strip(), "an error must say something"
        event("refused")
        return
    event("loaded")
    # Loaded: every job is one the simulator can take.
    capacity = workload.cluster.capacity
    for job in workload.jobs:
        assert 1 <= job.min_gpus <= job.requested_gpus <= job.max_gpus
        assert job.min_gpus <= capacity


def test_step_times_in_a_file_are_used_as_given_and_interpolated(tmp_path: Path) -> None:
    from ringleader.perf.speed import StepSample, fit_speed_model

    given = {1: 0.10, 2: 0.50, 4: 0.15, 8: 0.20}  # nothing a 5-term model fits well
    data = {
        "cluster": {"nodes": 1, "gpus_per_node": 8},
        "models": {"odd": {**MODEL, "step_time_s": given}},
        "jobs": [{"name": "a", "model": "odd"}],
    }
    speed = load_workload(_write(tmp_path, data)).jobs[0].profile.speed_model
    fitted = fit_speed_model(
        [StepSample(w, t, MODEL["batch_per_worker"]) for w, t in given.items()],
        grad_bytes=MODEL["grad_bytes"],
        examples_per_epoch=MODEL["examples_per_epoch"],
    )
    assert abs(fitted.step_time(2) - 0.50) / 0.50 > 0.2  # the fit alone is far off here
    for workers, seconds in given.items():
        assert speed.step_time(workers) == pytest.approx(seconds)
    assert speed.step_time(3) == pytest.approx(0.325)  # halfway between 2 and 4
    assert speed.step_time(6) == pytest.approx(0.175)
    # Beyond what was measured, the fit speaks; another batch is the fit's too.
    assert speed.step_time(16) == pytest.approx(fitted.step_time(16))
    assert speed.step_time(2, 32) == pytest.approx(fitted.step_time(2, 32))
    per_worker = MODEL["batch_per_worker"]
    assert speed.epochs_per_second(2) == pytest.approx(
        2 * per_worker / (MODEL["examples_per_epoch"] * 0.50)
    )


def test_a_fixed_global_batch_is_shared_by_the_workers(tmp_path: Path) -> None:
    data = {
        "cluster": {"nodes": 1, "gpus_per_node": 8},
        "models": {"m": MODEL},
        "jobs": [
            {"name": "weak", "model": "m"},
            {"name": "strong", "model": "m", "global_batch": 64, "max_gpus": 8},
        ],
    }
    jobs = {j.id: j for j in load_workload(_write(tmp_path, data)).jobs}
    weak, strong = jobs["weak"].profile, jobs["strong"].profile
    examples = MODEL["examples_per_epoch"]
    # One worker: the whole global batch, as measured; the same speed either way.
    assert strong.step_time(1) == pytest.approx(0.2) == weak.step_time(1)
    # Four workers: each takes 16, so a step is shorter, but an epoch takes as many steps.
    assert strong.speed_model.batch_at(4) == 16
    assert strong.step_time(4) < weak.step_time(4) == pytest.approx(0.25)
    assert strong.epoch_seconds(4) == pytest.approx(examples / 64 * strong.step_time(4))
    assert weak.epoch_seconds(4) == pytest.approx(examples / (4 * 64) * 0.25)
    # What a policy trades GPUs for: epochs per second at the global batch it keeps.
    assert strong.speed_model.epochs_per_second(4) == pytest.approx(
        64 / (examples * strong.step_time(4))
    )
    gain_strong = strong.speed_model.epochs_per_second(8) / strong.speed_model.epochs_per_second(1)
    gain_weak = weak.speed_model.epochs_per_second(8) / weak.speed_model.epochs_per_second(1)
    assert 1 < gain_strong < gain_weak  # strong scaling gains less from more workers
    too_small = {**data, "jobs": [{"name": "s", "model": "m", "global_batch": 4}]}
    with pytest.raises(WorkloadFileError, match=r"jobs\[0\]\.global_batch"):
        load_workload(_write(tmp_path, too_small, "small.yaml"))


def test_tiresias_thresholds_and_the_quantum_are_settable(tmp_path: Path) -> None:
    from ringleader.policy.catalog import SettingNotUsed, policy_from_config

    tiresias = policy_from_config("tiresias", thresholds_gpu_s=(60.0,))
    assert tiresias.order.thresholds_gpu_s == (60.0,)  # type: ignore[attr-defined]
    mine = policy_from_config("ringleader", thresholds_gpu_s=())
    assert mine.order.within.within.thresholds_gpu_s == ()  # type: ignore[attr-defined]
    assert policy_from_config("gandiva", quantum_s=5.0).quantum_s == 5.0  # type: ignore[attr-defined]
    with pytest.raises(SettingNotUsed, match="does not time-slice"):
        policy_from_config("fifo", quantum_s=5.0, strict=True)
    with pytest.raises(SettingNotUsed, match="attained-service"):
        policy_from_config("gandiva", thresholds_gpu_s=(1.0,), strict=True)

    jobs = [{"name": n, "model": "resnet110", "elastic": False, "work_scale": 0.02} for n in "abc"]
    data = {
        "cluster": {"nodes": 1, "gpus_per_node": 1},
        "simulation": {"quantum_s": 30},
        "jobs": jobs,
    }
    path = _write(tmp_path, data)

    def simulate(*args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
        out_json = tmp_path / "out.json"
        out_json.unlink(missing_ok=True)
        cmd = [sys.executable, "-m", "ringleader", "simulate", "--workload", str(path), *args]
        done = subprocess.run(
            [*cmd, "--json", str(out_json)], capture_output=True, text=True, timeout=120
        )
        result = json.loads(out_json.read_text()) if out_json.exists() else {}
        return done, result

    _, short = simulate("--policy", "gandiva")  # the file's 30 s quantum
    _, long = simulate("--policy", "gandiva", "--quantum-s", "600")  # the flag wins
    assert short["counts"]["suspend"] > long["counts"].get("suspend", 0)
    fifo, _ = simulate("--policy", "fifo")  # a file's quantum does not bar other policies
    assert fifo.returncode == 0, fifo.stderr
    refused, _ = simulate("--policy", "fifo", "--quantum-s", "5")
    assert refused.returncode == 2 and "does not time-slice" in refused.stderr
    falling, _ = simulate("--policy", "tiresias", "--tiresias-thresholds", "100,50")
    assert falling.returncode == 2 and "--tiresias-thresholds" in falling.stderr
    one_queue, result = simulate("--policy", "tiresias", "--tiresias-thresholds", "")
    assert one_queue.returncode == 0 and result["summary"]


def test_users_weights_and_priorities_in_a_file(tmp_path: Path) -> None:
    gen = {"model": "resnet110", "work_scale": 0.3, "max_gpus": 8, "mean_gap_s": 60}
    data: dict[str, Any] = {
        "cluster": {"nodes": 2, "gpus_per_node": 8},
        "poisson": [
            {**gen, "count": 30, "user": "ana", "name_prefix": "a"},
            {**gen, "count": 30, "user": "bo", "name_prefix": "b", "seed": 1},
        ],
    }

    def bo_jct(weights: dict[str, float]) -> float:
        path = _write(tmp_path, {**data, "simulation": {"user_weights": weights}})
        out_json = tmp_path / "out.json"
        cmd = [sys.executable, "-m", "ringleader", "simulate", "--workload", str(path)]
        done = subprocess.run(
            [*cmd, "--policy", "ringleader", "--json", str(out_json)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert "fair GPU-h" in done.stdout
        result = json.loads(out_json.read_text())
        for user in result["users"]:
            assert user["worst_hour"] >= 0.9, user
        jcts = [j["jct_s"] for j in result["jobs"] if j["id"].startswith("b")]
        return sum(jcts) / len(jcts)

    # Weighing bo 3 gives bo's jobs three quarters of the GPUs while both have work.
    assert bo_jct({"bo": 3.0}) < 0.8 * bo_jct({})
    with pytest.raises(WorkloadFileError, match="user_weights"):
        load_workload(_write(tmp_path, {**data, "simulation": {"user_weights": {"bo": 0}}}))
    job = {"name": "x", "model": "resnet110", "priority": 5000}
    with pytest.raises(WorkloadFileError, match=r"jobs\.0\.priority|priority"):
        load_workload(_write(tmp_path, {**data, "jobs": [job]}))
