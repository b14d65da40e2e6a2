"""The CLI as a user meets it: a real subprocess, real files, real exit codes."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


def ringleader(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ringleader", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={"COLUMNS": "120", "PATH": "/usr/bin:/bin"},
    )


def test_help_explains_simulate() -> None:
    out = ringleader("simulate", "--help")
    assert out.returncode == 0
    assert "--scenario" in out.stdout and "--workload" in out.stdout


def test_example_workload_runs_and_writes_json_and_plot(tmp_path: Path) -> None:
    out = ringleader(
        "simulate",
        "--workload",
        str(ROOT / "examples" / "workload.yaml"),
        "--policy",
        "precompute",
        "--json",
        str(tmp_path / "r.json"),
        "--plot",
        str(tmp_path / "r.png"),
    )
    assert out.returncode == 0, out.stderr
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["summary"]["finished"] == 41
    assert data["summary"]["avg_jct_s"] > 0
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"


def _bad(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "w.yaml"
    path.write_text(text)
    return ringleader("simulate", "--workload", str(path), "--policy", "precompute")


GOOD_CLUSTER = "cluster: {nodes: 1, gpus_per_node: 8}\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            GOOD_CLUSTER + "jobs: [{name: a, model: resnet110, max_gpus: -1}]",
            "jobs[0].max_gpus: Input should be greater than 0",
        ),
        (
            GOOD_CLUSTER + "jobs: [{name: a, model: resnet110, colour: red}]",
            "jobs[0].colour: Extra inputs are not permitted",
        ),
        (GOOD_CLUSTER + "jobs: [{name: a, model: resnet999}]", "unknown model 'resnet999'"),
        (
            GOOD_CLUSTER
            + "jobs: [{name: a, model: resnet110, min_gpus: 16, max_gpus: 16, gpus: 16}]",
            "cluster has only 8",
        ),
        ("cluster: {nodes: two, gpus_per_node: 8}\njobs: []", "cluster.nodes"),
        ("cluster: [1, 2\n", "not valid YAML"),
        ("- just\n- a list\n", "expected a mapping"),
        (GOOD_CLUSTER, "no jobs"),
        (
            GOOD_CLUSTER + "jobs: [{name: a, model: resnet110, gpus: 9}]",
            "jobs[0].gpus: 9 GPUs but the cluster has only 8",
        ),
        (GOOD_CLUSTER + "cluster: {nodes: 2, gpus_per_node: 8}\n", "duplicate key 'cluster'"),
        (
            GOOD_CLUSTER + "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a]\n",
            "aliases (*name) are not accepted",
        ),
        ("cluster: {nodes: 1000000000, gpus_per_node: 8}\njobs: []", "cluster.nodes"),
        (
            GOOD_CLUSTER + "jobs: [{name: a, model: resnet110, submit_s: 1e300}]",
            "jobs[0].submit_s",
        ),
    ],
)
def test_malformed_workloads_exit_2_naming_the_field(
    tmp_path: Path, text: str, expected: str
) -> None:
    out = _bad(tmp_path, text)
    assert out.returncode == 2
    assert expected in out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    assert str(tmp_path / "w.yaml") in out.stderr


def test_garbage_file_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "junk.yaml"
    path.write_bytes(bytes(range(256)) * 4096)
    out = ringleader("simulate", "--workload", str(path), "--policy", "one")
    assert out.returncode == 2 and "Traceback" not in out.stderr


def test_a_device_file_is_read_only_up_to_the_limit() -> None:
    out = ringleader("simulate", "--workload", "/dev/zero", "--policy", "one")
    assert out.returncode == 2 and "larger than" in out.stderr, out.stderr


def test_missing_file_and_unknown_policy_exit_2(tmp_path: Path) -> None:
    out = ringleader("simulate", "--workload", str(tmp_path / "nope.yaml"), "--policy", "one")
    assert out.returncode == 2 and "cannot read" in out.stderr
    example = str(ROOT / "examples" / "workload.yaml")
    out = ringleader("simulate", "--workload", example, "--policy", "fastest")
    assert out.returncode == 2 and "unknown policy 'fastest'" in out.stderr


def test_scenario_and_workload_are_exclusive() -> None:
    out = ringleader("simulate")
    assert out.returncode == 2 and "exactly one of" in out.stderr
    out = ringleader("simulate", "--scenario", "table9")
    assert out.returncode == 2 and "unknown scenario 'table9'" in out.stderr
    out = ringleader("simulate", "--scenario", "tensorlights", "--fifo-model", "lifo")
    assert out.returncode == 2 and "--fifo-model: unknown model 'lifo'" in out.stderr


def test_unwritable_outputs_exit_2(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    example = str(ROOT / "examples" / "workload.yaml")
    for flag in ("--json", "--plot"):
        out = ringleader(
            "simulate", "--workload", example, "--policy", "one", flag, str(blocker / "x")
        )
        assert out.returncode == 2, out.stderr
        assert flag in out.stderr and "Traceback" not in out.stderr


def test_outputs_are_checked_before_the_run_not_after(tmp_path: Path) -> None:
    for flag, target in (
        ("--plot", tmp_path),  # a directory
        ("--plot", tmp_path / "no-extension"),
        ("--json", tmp_path),
    ):
        out = ringleader("simulate", "--scenario", "table3", "--seeds", "1", flag, str(target))
        assert out.returncode == 2 and flag in out.stderr, out.stderr
        assert out.stdout == ""  # refused before any simulation printed a result


def test_type_agnostic_for_a_policy_with_no_type_stage_is_refused_not_ignored(
    tmp_path: Path,
) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(
        "cluster: {types: {v100: {nodes: 1, gpus_per_node: 4},"
        " k80: {nodes: 1, gpus_per_node: 4}}}\n"
        "jobs:\n  - {name: a, model: resnet110, gpus: 2}\n"
    )
    refused = ringleader(
        "simulate", "--workload", str(path), "--policy", "gandiva", "--type-agnostic"
    )
    assert refused.returncode == 2
    said = " ".join(refused.stderr.split())
    assert "--type-agnostic: policy gandiva has no type stage to turn off" in said
    assert "Traceback" not in refused.stderr
    taken = ringleader(
        "simulate", "--workload", str(path), "--policy", "tiresias", "--type-agnostic"
    )
    assert taken.returncode == 0, taken.stderr


def test_jobs_keeps_ids_users_and_states_whole_on_an_80_column_terminal() -> None:
    import io

    from rich.console import Console

    from ringleader.cli.runtime import _table

    ids = ["resnet20-alice-7f3a9c2d1e", "bert-bob-0001"]
    states = dict(zip(ids, ("running", "succeeded"), strict=True))
    rows = [
        {
            "id": i,
            "user": "alice",
            "state": states[i],
            "gpus": 4,
            "step": 1200,
            "epoch": 3.5,
            "epochs": 30,
            "loss": 0.42,
            "submitted_at": 1.7e9,
            "finished_at": None,
            "reason_code": "behind_in_order",
        }
        for i in ids
    ]
    out = io.StringIO()
    Console(file=out, width=80).print(_table(rows))
    lines = out.getvalue().splitlines()
    assert all(len(line) <= 80 for line in lines)
    for i in ids:  # each on one line with its user and state, none cut ("resn…", "suc…")
        assert any(i in line and "alice" in line and states[i] in line for line in lines)
    assert "…" not in out.getvalue()


def test_one_point_of_the_heterogeneity_sweep(tmp_path: Path) -> None:
    out = ringleader(
        *("simulate", "--scenario", "heterogeneity", "--load", "1.35"),
        *("--policy", "ringleader", "--seeds", "1", "--json", str(tmp_path / "h.json")),
    )
    assert out.returncode == 0, out.stderr
    cells = json.loads((tmp_path / "h.json").read_text())["results"]
    assert {(c["policy"], c["load"]) for c in cells} == {("ringleader", 1.35)}
    assert sorted(c["type_aware"] for c in cells) == [False, True]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--scenario", "table3", "--load", "1"), "--load applies to --scenario heterogeneity"),
        (("--scenario", "heterogeneity", "--policy", "fifo"), "compares tiresias and ringleader"),
        (("--scenario", "table3", "--policy", "fifo"), "this scenario runs its own strategies"),
    ],
)
def test_scenario_flags_that_do_not_apply_are_refused(args: tuple[str, ...], says: str) -> None:
    out = ringleader("simulate", *args)
    assert out.returncode == 2
    assert says in out.stderr
