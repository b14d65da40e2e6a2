"""A workload file written as JSON, as a program writes a large one (issue 59, item 14)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ringleader.sim import workload_file
from ringleader.sim.workload_file import load_workload
from ringleader.sim.workload_spec import WorkloadFileError

DATA = {
    "cluster": {"nodes": 2, "gpus_per_node": 4},
    "jobs": [
        {"name": f"j{i}", "model": "resnet110", "submit_s": 30.0 * i, "gpus": 1 + i % 4}
        for i in range(40)
    ],
    "poisson": [{"model": "resnet110", "count": 5, "mean_gap_s": 60, "seed": 3}],
}


def _jobs(path: Path) -> list[tuple[str, float, int, int]]:
    return [(j.id, j.submitted_at, j.requested_gpus, j.max_gpus) for j in load_workload(path).jobs]


def test_the_same_workload_as_json_and_as_yaml_loads_the_same_jobs(tmp_path: Path) -> None:
    as_yaml, as_json = tmp_path / "w.yaml", tmp_path / "w.json"
    as_yaml.write_text(yaml.safe_dump(DATA))
    as_json.write_text(json.dumps(DATA))
    assert _jobs(as_json) == _jobs(as_yaml)
    assert len(_jobs(as_json)) == 45


def test_a_repeated_key_in_json_is_refused_as_in_yaml(tmp_path: Path) -> None:
    path = tmp_path / "w.json"
    text = json.dumps(DATA)
    path.write_text(text.replace('"gpus": 1}', '"gpus": 1, "gpus": 3}', 1))
    with pytest.raises(WorkloadFileError, match="duplicate key 'gpus'"):
        load_workload(path)


def test_a_yaml_flow_mapping_is_still_read_as_yaml(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text("{cluster: {nodes: 1, gpus_per_node: 8}, jobs: [{name: a, model: resnet110}]}")
    assert [j.id for j in load_workload(path).jobs] == ["a"]


def test_a_yaml_file_over_its_cap_says_to_write_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = yaml.safe_dump(DATA)
    monkeypatch.setattr(workload_file, "MAX_YAML_BYTES", len(text) - 1)
    path = tmp_path / "w.yaml"
    path.write_text(text)
    with pytest.raises(WorkloadFileError, match="write it as JSON"):
        load_workload(path)
    as_json = tmp_path / "w.json"
    as_json.write_text(json.dumps(DATA, indent=1))
    assert len(text) < len(as_json.read_text())  # larger, and still read
    assert len(load_workload(as_json).jobs) == 45


def test_a_million_jobs_fit_under_the_json_cap() -> None:
    job = {"name": "job-999999", "model": "resnet110", "submit_s": 2999999.9, "gpus": 4}
    assert 1_000_000 * (len(json.dumps(job)) + 2) < workload_file.MAX_FILE_BYTES
