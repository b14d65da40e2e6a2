"""The Slurm executor through slurmrestd with a JWT (issue 60, item 1: ``--slurm-url``).

The lab's slurmrestd listens on its controller host and takes JWTs only; the
server, also there, reaches Slurm through it alone for the view, submissions,
states and stops.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ringleader.slurm import drill
from ringleader.slurm.conf import LabShape
from ringleader.slurm.drill import Served
from ringleader.slurm.lab import SlurmLab, missing_tools
from ringleader.slurm.token import Token, TokenError, token_user

DDP = Path(__file__).parents[1] / "examples" / "porting" / "ddp.py"
needs_lab = pytest.mark.skipif(
    os.geteuid() != 0 or bool(missing_tools()),
    reason="the Slurm lab needs root (namespaces) and Slurm (`make test` installs it)",
)


@pytest.fixture(scope="module")
def lab() -> Iterator[SlurmLab]:
    root = Path("/run") / f"rl-slurm-rest-{os.getpid()}"
    with SlurmLab(LabShape(nodes=3, gpus_per_node=2), root) as up:
        up.start_rest()
        yield up
    shutil.rmtree(root)


@pytest.fixture(scope="module")
def served(lab: SlurmLab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    state = tmp_path_factory.mktemp("slurm-rest")
    token = state / "slurm.jwt"  # as a site renews it: a file the server reads again
    token.write_text(lab.token("root"))
    token.chmod(0o600)
    flags = ["--slurm-url", lab.rest_url]
    env = {"SLURM_JWT_FILE": str(token)}
    with drill.served(lab, state, state / "server.log", more=flags, env=env) as here:
        yield here


def _jwt(lab: SlurmLab) -> dict[str, str]:
    return {"SLURM_JWT": lab.token("root")}


def _jobs(served: Served) -> list[dict[str, object]]:
    listed = json.loads(served.cli("jobs", "--json").stdout)
    return list(listed["jobs"] if isinstance(listed, dict) else listed)


def _job_id(served: Served, name: str) -> str:
    return next(str(j["id"]) for j in _jobs(served) if j["name"] == name)


def _state(served: Served, job: str) -> object:
    return next(j["state"] for j in _jobs(served) if j["id"] == job)


def _log(served: Served, job: str, rank: int) -> str:
    return served.cli("logs", job, "--rank", str(rank)).stdout


def _in_lab(lab: SlurmLab, code: str) -> object:
    """``code``'s last line, printed as JSON, run on the controller host with the token."""
    done = lab.run([sys.executable, "-c", code], timeout=60, env=_jwt(lab))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@needs_lab
def test_an_unchanged_ddp_script_runs_on_two_nodes_through_slurmrestd(
    served: Served, tmp_path: Path
) -> None:
    done = served.cli(
        *("run", "--gpus", "4", "--wait", "--name", "ddp", "--workdir", str(tmp_path)),
        *("--", sys.executable, str(DDP), "--epochs", "1"),
        timeout=180,
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "epoch 0 loss" in done.stdout
    assert "launched 4 GPU(s) on" in served.cli("show", _job_id(served, "ddp")).stdout
    said = (served.lab.root / "log" / "slurmrestd.out").read_text()
    assert "POST /slurm/v0.0.38/job/submit" in said  # the way in was slurmrestd's


@needs_lab
def test_a_cancel_through_slurmrestd_reaches_every_rank_as_sigterm(
    served: Served, tmp_path: Path
) -> None:
    script = 'trap "echo rank $RANK got TERM; exit 3" TERM; echo rank $RANK ready; sleep 300 & wait'
    done = served.cli(
        *("run", "--gpus", "2", "--name", "sleeper", "--workdir", str(tmp_path)),
        *("--", "bash", "-c", script),
    )
    assert done.returncode == 0, done.stderr
    job = _job_id(served, "sleeper")
    deadline = time.monotonic() + 60
    while not all(f"rank {r} ready" in _log(served, job, r) for r in (0, 1)):
        assert time.monotonic() < deadline, served.cli("show", job).stdout
        time.sleep(0.5)
    asked = time.monotonic()
    assert served.cli("cancel", job).returncode == 0
    while _state(served, job) != "cancelled":
        assert time.monotonic() - asked < 30, served.cli("show", job).stdout
        time.sleep(0.3)
    # A rank's line may reach its log after Slurm marks the job cancelled: look again
    # for a while. A rank that never got SIGTERM (KillWait is 5 s, then SIGKILL) still
    # fails here.
    deadline = time.monotonic() + 15
    logs = _log(served, job, 0) + _log(served, job, 1)
    while not ("rank 0 got TERM" in logs and "rank 1 got TERM" in logs):
        assert time.monotonic() < deadline, logs
        time.sleep(0.5)
        logs = _log(served, job, 0) + _log(served, job, 1)


@needs_lab
def test_slurmrestd_going_away_holds_the_jobs_and_they_finish_when_it_is_back(
    served: Served, tmp_path: Path
) -> None:
    first = served.cli("run", "--gpus", "2", "--name", "through", "--", "sleep", "4")
    job = first.stdout.split()[-1]
    deadline = time.monotonic() + 60
    while _state(served, job) != "running":
        assert time.monotonic() < deadline, served.cli("show", job).stdout
        time.sleep(0.3)
    served.lab.stop_rest()
    try:
        deadline = time.monotonic() + 30
        while served.get("/cluster")["available"]:
            assert time.monotonic() < deadline, "the server never said slurmrestd was away"
            time.sleep(0.3)
        cluster = served.get("/cluster")
        assert served.lab.rest_url in cluster["reason"], cluster
        during = served.cli("run", "--gpus", "1", "--name", "during", "--", "sleep", "1")
        assert during.returncode == 0, during.stderr  # the API still takes submissions
        assert _state(served, job) == "running"
    finally:
        served.lab.start_rest()
    later = during.stdout.split()[-1]
    deadline = time.monotonic() + 90
    while {_state(served, j) for j in (job, later)} != {"succeeded"}:
        assert time.monotonic() < deadline, [served.cli("show", j).stdout for j in (job, later)]
        time.sleep(0.5)


@needs_lab
def test_a_refused_token_holds_the_jobs_until_its_file_is_renewed(served: Served) -> None:
    token = served.state / "slurm.jwt"
    good = token.read_text()
    forged = good.rsplit(".", 1)[0] + ".c2lnbmVkIGJ5IG5vYm9keQ"
    token.write_text(forged)
    try:
        deadline = time.monotonic() + 30
        while served.get("/cluster")["available"]:
            assert time.monotonic() < deadline, "the server never said the token was refused"
            time.sleep(0.3)
        reason = served.get("/cluster")["reason"]
        assert "refused the token" in reason and "SLURM_JWT_FILE" in reason, reason
        assert forged.rsplit(".", 1)[1] not in reason  # the token itself is never said
    finally:
        token.write_text(served.lab.token("root"))  # renewed, as a cron job would
    deadline = time.monotonic() + 30
    while not served.get("/cluster")["available"]:
        assert time.monotonic() < deadline, served.get("/cluster")
        time.sleep(0.3)
    assert "Traceback" not in served.log.read_text()


@needs_lab
def test_a_drained_node_leaves_the_view_slurmrestd_gives(lab: SlurmLab) -> None:
    drain = ["scontrol", "update", "nodename=n3", "state=drain", "reason=test"]
    assert lab.run(drain).returncode == 0
    try:
        code = (
            "import json; from ringleader.slurm.rest import SlurmRest\n"
            f"nodes = SlurmRest.from_env({lab.rest_url!r}, 'gpu').nodes()\n"
            "print(json.dumps({n.name: [n.gpus, n.state, n.usable] for n in nodes}))"
        )
        seen = _in_lab(lab, code)
    finally:
        lab.run(["scontrol", "update", "nodename=n3", "state=resume"])
    assert isinstance(seen, dict)
    assert seen["n1"][0] == 2 and seen["n1"][2] is True
    assert seen["n3"][1:] == ["drain", False]


@needs_lab
def test_a_bad_token_stops_the_server_with_exit_2_naming_slurm_jwt(
    lab: SlurmLab, tmp_path: Path
) -> None:
    forged = lab.token("root").rsplit(".", 1)[0] + ".c2lnbmVkIGJ5IG5vYm9keQ"
    argv = [sys.executable, "-m", "ringleader", "server", "--executor", "slurm"]
    argv += ["--slurm-url", lab.rest_url, "--state-dir", str(tmp_path), "--no-isolate-jobs"]
    done = lab.run(argv, timeout=60, env={"SLURM_JWT": forged})
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "SLURM_JWT" in done.stderr and "Traceback" not in done.stderr


def test_slurm_url_without_a_token_exits_2_naming_slurm_jwt(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "SLURM_JWT"}
    argv = [sys.executable, "-m", "ringleader", "server", "--executor", "slurm"]
    argv += ["--slurm-url", "http://127.0.0.1:9", "--state-dir", str(tmp_path), "--no-isolate-jobs"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 2
    assert "SLURM_JWT" in done.stderr and "scontrol token" in done.stderr


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--slurm-url", "ftp://head:6820"], "not the address of slurmrestd"),
        (["--slurm-url", "http://head:6820/$(reboot)"], "not the address of slurmrestd"),
        (["--executor", "local", "--slurm-url", "http://head:6820"], "only with --executor"),
    ],
)
def test_a_bad_slurm_url_exits_2_naming_the_flag(flags: list[str], said: str) -> None:
    argv = [sys.executable, "-m", "ringleader", "server"]
    if "--executor" not in flags:
        argv += ["--executor", "slurm"]
    env = {**os.environ, "SLURM_JWT": "a.b.c"}
    done = subprocess.run([*argv, *flags], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 2
    assert "--slurm-url" in done.stderr and said in done.stderr


def test_slurmrestd_unreachable_exits_2_naming_the_address(tmp_path: Path) -> None:
    token = "e30." + "eyJzdW4iOiJyb290In0" + ".sig"  # {"sun": "root"}
    argv = [sys.executable, "-m", "ringleader", "server", "--executor", "slurm"]
    argv += ["--slurm-url", "http://127.0.0.1:9", "--state-dir", str(tmp_path), "--no-isolate-jobs"]
    env = {**os.environ, "SLURM_JWT": token}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "http://127.0.0.1:9" in done.stderr and "Traceback" not in done.stderr


def test_the_token_names_its_user_and_a_non_token_is_refused() -> None:
    assert token_user("e30.eyJzdW4iOiJhbGljZSJ9.x") == "alice"
    for bad in ("", "nodots", "a.!!!.c", "e30.e30.x"):  # e30 is {}: no `sun`
        with pytest.raises(TokenError, match="scontrol token"):
            token_user(bad)


def test_a_token_file_is_read_again_when_it_changes(tmp_path: Path) -> None:
    alice, bob = "e30.eyJzdW4iOiJhbGljZSJ9.x", "e30.eyJzdW4iOiJib2IifQ.y"
    path = tmp_path / "slurm.jwt"
    path.write_text(f"SLURM_JWT={alice}\n")  # as `scontrol token` prints it
    token = Token.from_env({"SLURM_JWT_FILE": str(path)})
    assert (token.current(), token.user) == (alice, "alice")
    path.write_text(bob)
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))  # a later mtime, surely
    assert (token.current(), token.user) == (bob, "bob")
    assert alice not in repr(token) and bob not in repr(token)
    path.unlink()
    with pytest.raises(TokenError, match=str(path)):
        token.current()
    with pytest.raises(TokenError, match="SLURM_JWT_FILE"):
        Token.from_env({"SLURM_JWT_FILE": str(tmp_path / "none")})
