"""Unchanged DDP scripts never hang at exit under warm starts: each style, quiet and loaded.

A ``ringleader server --gpus 2`` (local executor, warm starts on unless
``--cold``) runs each script style (``STYLES``: torchrun-style gloo scripts
that use nothing from ringleader, written as people write them) ``RUNS``
times in a row, each as ``ringleader run --gpus 2 --wait -- python wrapper.py
SCRIPT ARGS``, first on a quiet machine, then beside one CPU-bound process per
core (``--load``). The wrapper's first line records whether torch was already
imported when it started (it was forked warm), then runs the script with
``runpy`` as ``__main__``. A run still going after ``TIMEOUT_S`` counts as a
hang: its ranks' state, log tails and (if py-spy is installed) stacks are
recorded, then it is cancelled and its workers killed.

Settle latency is the job's ``finished_at`` minus the newest mtime of its
ranks' exit files (``run/gen*/rank*.exit``): how long the server took to see
that every rank had exited. Target: 0 hangs, settle latency under 2 s.

The fork server imports torch after the server starts; until it is ready,
workers start cold. Warm-up runs (not counted) go first, until one starts
warm on every rank (one run with ``--cold``).

Writes bench/results/ddp-exit.json (``--cold``: ddp-exit-cold.json).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from _common import stamp, wait_until
from ringleader.runtime.workers.executor.local import free_port

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
STYLES: dict[str, tuple[Path, tuple[str, ...]]] = {
    "globals": (DATA / "plain_ddp.py", ()),
    "trainer": (DATA / "ddp_exit" / "trainer.py", ("2", "1")),
    "main-local": (DATA / "ddp_exit" / "main_local.py", ()),
    "no-destroy": (DATA / "ddp_exit" / "no_destroy.py", ("2",)),
}
"""Each style's script and arguments: the model a module global with
``destroy_process_group()`` at the end; the PyTorch tutorial's ``Trainer``
class (a local of ``main()``, a snapshot every epoch, ``destroy`` at the end);
the model and optimizer locals of ``main()``; a ``Trainer`` and no ``destroy``."""
RESULTS = Path(__file__).parent / "results"
TIMEOUT_S = 60.0
SETTLE_TARGET_S = 2.0
WARMUP_MAX = 5
GPUS = 2

WRAPPER = """\
import sys; warm = "torch" in sys.modules  # first: was this process forked warm?
import os
import runpy

with open(f"warm{os.environ['RANK']}", "w") as f:
    f.write(str(warm))
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Server:
    def __init__(self, state: Path, warm: bool) -> None:
        self.state = state
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.args = [
            sys.executable,
            "-m",
            "ringleader",
            "server",
            "--gpus",
            str(GPUS),
            "--state-dir",
            str(state),
            "--port",
            str(self.port),
            "--round-s",
            "2",
            "--warm-start" if warm else "--no-warm-start",
            "--no-isolate-jobs",  # this user's own jobs, as the benchmark's user
            # A hang is what is measured: the server must not end it first (lingering).
            "--exit-grace-s",
            "3600",
        ]
        state.mkdir(parents=True, exist_ok=True)
        with open(state / "server.log", "ab") as log:
            self.proc = subprocess.Popen(
                self.args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        wait_until(self._healthy, 60, poll_s=0.2)
        self.token = (state / "admin.token").read_text().strip()
        self.headers = {"Authorization": f"Bearer {self.token}"}

    def _healthy(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"server exited: {(self.state / 'server.log').read_text()}")
        try:
            return httpx.get(self.url + "/health", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def job(self, job_id: str) -> dict[str, Any]:
        r = httpx.get(f"{self.url}/jobs/{job_id}", timeout=10, headers=self.headers)
        r.raise_for_status()
        data: dict[str, Any] = r.json()
        return data

    def stop(self) -> None:
        """SIGTERM to our own server (by pid), SIGKILL if it lingers; then any workers left."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for pid_file in self.state.glob("jobs/*/run/*/rank*.pid"):
            with contextlib.suppress(OSError, ValueError):
                os.killpg(int(pid_file.read_text().split()[0]), signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):
            out += [int(p) for p in task.read_text().split()]
    return out


def _proc_info(pid: int) -> dict[str, Any]:
    info: dict[str, Any] = {"pid": pid}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("State", "Threads"):
                info[key.lower()] = value.strip()
    with contextlib.suppress(OSError):
        info["wchan"] = Path(f"/proc/{pid}/wchan").read_text()
    with contextlib.suppress(OSError):
        info["cmdline"] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent))
    if spy is not None:
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            dump = subprocess.run(
                [spy, "dump", "--native", "--pid", str(pid)],
                capture_output=True,
                text=True,
                timeout=30,
            )
            info["py_spy"] = (dump.stdout + dump.stderr)[-6000:]
    return info


def _evidence(server: Server, job_id: str, workdir: Path) -> dict[str, Any]:
    """What a hung run looks like: each rank's files, live processes and log tail."""
    job_dir = server.state / "jobs" / job_id
    ranks: dict[str, Any] = {}
    for pid_file in sorted(job_dir.glob("run/gen*/rank*.pid")):
        rank = pid_file.stem
        exit_file = pid_file.with_suffix(".exit")
        wrapper_pid = int(pid_file.read_text().split()[0])
        number = rank.removeprefix("rank")
        row: dict[str, Any] = {
            "generation": pid_file.parent.name,
            "wrapper_pid": wrapper_pid,
            "exit_code": exit_file.read_text().strip() if exit_file.exists() else None,
            "script_done": (workdir / f"done{number}").exists(),
            "warm": _read(workdir / f"warm{number}"),
        }
        if _alive(wrapper_pid):
            row["wrapper"] = _proc_info(wrapper_pid)
            row["workers"] = [_proc_info(child) for child in _children(wrapper_pid)]
        ranks[rank] = row
    logs = {
        path.name: path.read_text(errors="replace")[-3000:]
        for path in sorted(job_dir.glob("logs/*"))
        if path.is_file()
    }
    return {"job_dir": str(job_dir), "ranks": ranks, "logs": logs}


def _main_thread(rank: dict[str, Any]) -> list[str]:
    """The innermost frames of the hung worker's main thread, from py-spy (if any)."""
    for worker in rank.get("workers", []):
        dump: str = worker.get("py_spy", "")
        if "MainThread" in dump:
            frames = dump.split("MainThread", 1)[1].split("\nThread ", 1)[0]
            return [f.strip() for f in frames.splitlines()[1:] if f.strip()][:16]
    return []


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _kill_job(server: Server, job_id: str) -> None:
    with contextlib.suppress(httpx.HTTPError):
        httpx.delete(f"{server.url}/jobs/{job_id}", timeout=10, headers=server.headers)
    with contextlib.suppress(TimeoutError):
        wait_until(
            lambda: server.job(job_id)["state"] in ("cancelled", "failed", "succeeded"),
            20,
            poll_s=0.2,
        )
    for pid_file in (server.state / "jobs" / job_id).glob("run/*/rank*.pid"):
        with contextlib.suppress(OSError, ValueError):
            os.killpg(int(pid_file.read_text().split()[0]), signal.SIGKILL)


def _job_id(out: Path, server: Server, before: set[str]) -> str | None:
    first = (_read(out) or "").split("\n", 1)[0].strip()
    if first:
        return first
    new = [j["id"] for j in _list_jobs(server) if j["id"] not in before]
    return new[0] if new else None


def one_run(server: Server, base: Path, command: list[str], label: str) -> dict[str, Any]:
    workdir = base / label
    workdir.mkdir()
    out = workdir / "cli.out"
    env = {
        **os.environ,
        "RINGLEADER_URL": server.url,
        "RINGLEADER_TOKEN": server.token,
        "COLUMNS": "200",
    }
    before = {j["id"] for j in _list_jobs(server)}
    cli = [sys.executable, "-m", "ringleader", "run", "--gpus", str(GPUS), "--wait"]
    began = time.monotonic()
    with open(out, "w") as stdout, open(workdir / "cli.err", "w") as stderr:
        proc = subprocess.Popen(
            [*cli, "--", "python", *command], stdout=stdout, stderr=stderr, cwd=workdir, env=env
        )
        try:
            code: int | None = proc.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            code = None
    wall = time.monotonic() - began
    job_id = _job_id(out, server, before)
    row: dict[str, Any] = {"run": label, "job": job_id, "cli_exit": code, "wall_s": round(wall, 3)}
    warm = [_read(workdir / f"warm{r}") for r in range(GPUS)]
    row["warm_ranks"] = [w == "True" for w in warm]
    row["warm"] = all(row["warm_ranks"])
    row["hung"] = code is None
    if job_id is None:
        row["state"] = "unknown"
        return row
    job = server.job(job_id)
    row["state"] = job["state"]
    # A rank ended for lingering hung all the same (the server ended it, not the script).
    ended = [e for e in job.get("events") or [] if e.get("ended_ranks")]
    if ended:
        row["hung"], row["ended_ranks"] = True, ended[0]["ended_ranks"]
    row["attempts"] = job.get("attempts")
    row["generations"] = len(list((server.state / "jobs" / job_id).glob("run/gen*")))
    if row["hung"]:
        row["evidence"] = _evidence(server, job_id, workdir)
        row["hung_ranks"] = {
            rank: {"script_done": r["script_done"], "main_thread": _main_thread(r)}
            for rank, r in row["evidence"]["ranks"].items()
            if r["exit_code"] is None
        }
        _kill_job(server, job_id)
        return row
    exits = list((server.state / "jobs" / job_id).glob("run/gen*/rank*.exit"))
    row["exit_files"] = len(exits)
    row["exit_codes"] = sorted(p.read_text().strip() for p in exits)
    if exits and job.get("finished_at") is not None:
        last_exit = max(p.stat().st_mtime for p in exits)
        row["settle_s"] = round(float(job["finished_at"]) - last_exit, 3)
    if job["state"] != "succeeded":
        row["error"] = job.get("error")
    return row


def _list_jobs(server: Server) -> list[dict[str, Any]]:
    """The newest few jobs, newest first."""
    r = httpx.get(
        server.url + "/jobs",
        params={"order": "desc", "limit": 10},
        timeout=10,
        headers=server.headers,
    )
    r.raise_for_status()
    rows: list[dict[str, Any]] = r.json()
    return rows


class Load:
    """One CPU-bound process per core beside the runs, stopped by pid."""

    def __init__(self) -> None:
        burn = "while True: pass"
        self.procs = [
            subprocess.Popen([sys.executable, "-c", burn]) for _ in range(os.cpu_count() or 1)
        ]

    def stop(self) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait()


def _series(rows: list[dict[str, Any]]) -> dict[str, Any]:
    settle = [r["settle_s"] for r in rows if "settle_s" in r]
    walls = [r["wall_s"] for r in rows if not r["hung"]]
    hangs = sum(r["hung"] for r in rows)
    failures = sum(not r["hung"] and r["state"] != "succeeded" for r in rows)
    return {
        "runs": len(rows),
        "hangs": hangs,
        "failures": failures,
        "warm_runs": sum(r["warm"] for r in rows),
        "settle_s": {
            "median": round(statistics.median(settle), 3) if settle else None,
            "p95": round(_pct(settle, 0.95), 3) if settle else None,
            "max": round(max(settle), 3) if settle else None,
        },
        "wall_s": {
            "median": round(statistics.median(walls), 3) if walls else None,
            "max": round(max(walls), 3) if walls else None,
        },
        "hung_runs": [
            {"run": r["run"], "job": r["job"], "ranks": sorted(r.get("hung_ranks", {}))}
            for r in rows
            if r["hung"]
        ],
        "met": hangs == 0
        and failures == 0
        and bool(settle)
        and max(settle) < SETTLE_TARGET_S
        and len(rows) > 0,
    }


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=100, help="runs of each style per condition")
    parser.add_argument(
        "--styles",
        default=",".join(STYLES),
        help=f"comma-separated, of: {', '.join(STYLES)} (default: all)",
    )
    parser.add_argument(
        "--load",
        choices=("quiet", "loaded", "both"),
        default="both",
        help="quiet machine, one CPU-bound process per core beside, or both (default)",
    )
    parser.add_argument("--cold", action="store_true", help="server with --no-warm-start")
    parser.add_argument("--keep", action="store_true", help="keep the state dir even if clean")
    parser.add_argument("--out", type=Path, help="default: bench/results/ddp-exit[-cold].json")
    args = parser.parse_args()
    styles = [s.strip() for s in args.styles.split(",") if s.strip()]
    unknown = [s for s in styles if s not in STYLES]
    if unknown or not styles:
        parser.error(f"--styles: unknown {unknown or 'none given'}; choose from {list(STYLES)}")
    args.styles = styles
    return args


def _run_all(
    server: Server,
    base: Path,
    commands: dict[str, list[str]],
    conditions: list[str],
    args: argparse.Namespace,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Warm-ups, then ``args.runs`` of each style in each condition: (warm-ups, series, rows)."""
    warmups: list[dict[str, Any]] = []
    series: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    for i in range(WARMUP_MAX):
        warmups.append(one_run(server, base, commands[args.styles[0]], f"warmup{i:02d}"))
        print(f"warm-up {i}: {json.dumps(_brief(warmups[-1]))}", file=sys.stderr)
        if args.cold or warmups[-1]["warm"]:
            break
    for condition in conditions:
        load = Load() if condition == "loaded" else None
        try:
            for style in args.styles:
                these = []
                for i in range(args.runs):
                    label = f"{condition}-{style}-{i:03d}"
                    row = one_run(server, base, commands[style], label)
                    row.update(style=style, condition=condition)
                    these.append(row)
                    print(f"{label}: {json.dumps(_brief(row))}", file=sys.stderr)
                series.append({"style": style, "condition": condition, **_series(these)})
                rows += these
        finally:
            if load is not None:
                load.stop()
    return warmups, series, rows


def main() -> None:
    args = _parse()
    # Stopped early (or from the background, where SIGINT starts ignored): stop the server too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    out_path = args.out or RESULTS / ("ddp-exit-cold.json" if args.cold else "ddp-exit.json")
    conditions = ["quiet", "loaded"] if args.load == "both" else [args.load]

    base = Path(tempfile.mkdtemp(prefix="ddp-exit-"))
    commands: dict[str, list[str]] = {}
    for style in args.styles:
        script, script_args = STYLES[style]
        shutil.copy(script, base / f"{style}.py")
        commands[style] = [str(base / "wrapper.py"), str(base / f"{style}.py"), *script_args]
    (base / "wrapper.py").write_text(WRAPPER)
    server = Server(base / "state", warm=not args.cold)
    started = datetime.datetime.now(datetime.UTC)
    try:
        warmups, series, rows = _run_all(server, base, commands, conditions, args)
    finally:
        server.stop()

    whole = _series(rows)
    report: dict[str, Any] = {
        "what": __doc__.split("\n")[0],
        **stamp("python bench/ddp_exit.py"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "date": started.isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": _torch_version(),
        "server": " ".join(server.args[1:]),
        "job_command": f"ringleader run --gpus {GPUS} --wait -- python wrapper.py SCRIPT ARGS",
        "styles": {
            name: {"script": str(path.relative_to(ROOT)), "args": list(script_args)}
            for name, (path, script_args) in STYLES.items()
            if name in args.styles
        },
        "load": "one `python -c 'while True: pass'` per core beside the loaded runs",
        "warm_start": not args.cold,
        "timeout_s": TIMEOUT_S,
        "settle_target_s": SETTLE_TARGET_S,
        **{k: whole[k] for k in ("runs", "hangs", "failures", "warm_runs", "settle_s", "met")},
        "series": series,
        "warmup_runs": len(warmups),
        "warmups": warmups,
        "hung_or_failed": [r for r in rows if r["hung"] or r["state"] != "succeeded"],
        "per_run": [_brief(r) for r in rows],
    }
    if whole["hangs"] or whole["failures"] or args.keep:
        report["state_dir"] = str(base)
    else:
        shutil.rmtree(base, ignore_errors=True)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(report, indent=2) + "\n")
    summary = {k: report[k] for k in ("runs", "hangs", "failures", "warm_runs", "settle_s", "met")}
    summary["series"] = [
        {k: s[k] for k in ("style", "condition", "runs", "hangs", "failures", "settle_s")}
        for s in series
    ]
    print(json.dumps(summary, indent=2))


def _brief(row: dict[str, Any]) -> dict[str, Any]:
    keys = ("run", "job", "state", "hung", "warm", "wall_s", "settle_s")
    return {k: row.get(k) for k in keys}


def _torch_version() -> str | None:
    try:
        import torch
    except ImportError:
        return None
    return str(torch.__version__)


if __name__ == "__main__":
    main()
