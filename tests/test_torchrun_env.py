"""The torchrun environment contract, variable by variable, warm and cold."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from ringleader.policy.model.views import Device
from ringleader.runtime.workers.executor.base import RankPlace, gang_places
from ringleader.runtime.workers.executor.local import LocalExecutor

CONTRACT = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    "ROLE_NAME",
    "ROLE_RANK",
    "ROLE_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_MAX_RESTARTS",
    "TORCHELASTIC_RUN_ID",
    "OMP_NUM_THREADS",
    "CUDA_VISIBLE_DEVICES",
)


def test_ranks_are_placed_per_node_as_torchrun_numbers_them() -> None:
    devices = [Device("b", 0), Device("b", 1), Device("a", 3), Device("b", 2), Device("c", 0)]
    assert gang_places(devices) == [
        RankPlace(0, 3, 0, 3),
        RankPlace(1, 3, 0, 3),
        RankPlace(0, 1, 1, 3),
        RankPlace(2, 3, 0, 3),
        RankPlace(0, 1, 2, 3),
    ]
    assert gang_places([Device("n", 0)]) == [RankPlace(0, 1, 0, 1)]


DUMP = f"""
import json, os, sys
names = {list(CONTRACT)!r}
out = {{k: os.environ.get(k) for k in names}}
out["preloaded"] = "torch" in sys.modules  # forked from the warm server
with open(sys.argv[1] + "/env" + os.environ["RANK"] + ".json", "w") as f:
    json.dump(out, f)
"""


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
def test_every_rank_gets_torchruns_variables(
    executor: LocalExecutor, tmp_path: Path, warm: bool
) -> None:
    script = tmp_path / "dump.py"
    script.write_text(DUMP)
    command = ["python", str(script), str(tmp_path)]
    if not warm:  # a command the fork server does not take: a cold start
        command = ["sh", "-c", 'exec python "$0" "$@"', str(script), str(tmp_path)]
    devices = [Device("local", 0), Device("local", 1)]
    executor.launch("job-7", tmp_path, 3, command, devices, {}, max_restarts=2)
    deadline = time.monotonic() + 30
    while not executor.status(tmp_path, 3, 2).finished and time.monotonic() < deadline:
        time.sleep(0.05)
    envs = [json.loads((tmp_path / f"env{r}.json").read_text()) for r in (0, 1)]
    for rank, env in enumerate(envs):
        assert env == env | {
            "RANK": str(rank),
            "WORLD_SIZE": "2",
            "LOCAL_RANK": str(rank),
            "LOCAL_WORLD_SIZE": "2",
            "GROUP_RANK": "0",
            "GROUP_WORLD_SIZE": "1",
            "ROLE_NAME": "default",
            "ROLE_RANK": str(rank),
            "ROLE_WORLD_SIZE": "2",
            "MASTER_ADDR": "127.0.0.1",
            "TORCHELASTIC_RESTART_COUNT": "2",  # generation 3: two launches before it
            "TORCHELASTIC_MAX_RESTARTS": "2",
            "TORCHELASTIC_RUN_ID": "job-7",
            "OMP_NUM_THREADS": str(len(executor.cpus_for(rank))),
            "CUDA_VISIBLE_DEVICES": "",
        }, env
        assert env["MASTER_PORT"] == envs[0]["MASTER_PORT"] and int(env["MASTER_PORT"]) > 0
        assert env["preloaded"] is warm  # torchrun's variables do not force a cold start
