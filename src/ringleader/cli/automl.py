"""``ringleader automl``: a real hyper-parameter search, run as jobs on a ringleader server.

Optuna samples the configurations; each runs as one job (a CIFAR-shaped ResNet
on synthetic data, its learning rate and depth from the sample). Every
``--poll-s`` the search reads each job's loss per epoch, reports it to
Optuna's pruner (``ringleader.tuning.EarlyFeedback``) and sets the jobs'
priorities from the answer through the API. With the server's ``gandiva``
policy the configurations time-slice, so all give early feedback and the
promising ones get the GPUs: Gandiva's AutoML experiment, for real.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from ringleader.cli import terminal
from ringleader.cli.client import job_path, request, request_json
from ringleader.cli.errors import check_output_file, fail
from ringleader.tuning import EarlyFeedback, MissingOptuna, optuna_module

console = terminal.console()
COMMAND = (
    "python -m ringleader.workloads.resnet --depth {depth} --image-size 8 --batch 16 "
    "--examples-per-epoch {examples} --epochs {epochs} --base-lr {lr:.6g} "
    "--checkpoint-every-s 5"
)


def _sample(trials: int, seed: int) -> list[dict[str, Any]]:
    optuna = optuna_module()
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    out = []
    for _ in range(trials):
        trial = study.ask()
        out.append(
            {
                "lr": trial.suggest_float("lr", 1e-3, 1.0, log=True),
                "depth": trial.suggest_categorical("depth", [8, 14]),
            }
        )
    return out


def _loss_by_epoch(progress: list[dict[str, Any]]) -> dict[int, float]:
    """Mean loss over each completed epoch's minibatches."""
    sums: dict[int, list[float]] = {}
    for rec in progress:
        if "loss" in rec and rec.get("loss") is not None:
            sums.setdefault(int(float(rec["epoch"]) - 1e-9) + 1, []).append(float(rec["loss"]))
    done = max((int(float(r["epoch"])) for r in progress if "epoch" in r), default=0)
    return {e: sum(v) / len(v) for e, v in sums.items() if e <= done}


def automl(
    trials: Annotated[int, typer.Option(min=2, help="Configurations to try.")] = 8,
    epochs: Annotated[float, typer.Option(min=1, help="Epochs each configuration trains.")] = 6,
    examples: Annotated[int, typer.Option(min=16, help="Examples per epoch.")] = 512,
    targets: Annotated[
        str, typer.Option(help="Comma-separated loss targets to time (lower is better).")
    ] = "1.5,1.0,0.5",
    seed: Annotated[int, typer.Option(help="Optuna sampler seed.")] = 0,
    feedback: Annotated[
        bool, typer.Option(help="Steer priorities by early feedback (off: a plain queue).")
    ] = True,
    poll_s: Annotated[float, typer.Option(min=0.2, help="Seconds between looks.")] = 2.0,
    json_path: Annotated[Path | None, typer.Option("--json", help="Write results here.")] = None,
) -> None:
    """Run a hyper-parameter search as jobs on the server at RINGLEADER_URL.

    Start the server with `--policy gandiva` to time-slice the configurations
    (Gandiva's AutoML experiment), or `--policy no-sharing` for the baseline.
    """
    if json_path is not None:
        check_output_file("--json", json_path)
    try:
        goals = sorted((float(x) for x in targets.split(",") if x.strip()), reverse=True)
    except ValueError:
        fail(f"--targets: {targets!r} is not a comma-separated list of numbers")
    try:
        configs = _sample(trials, seed)
    except MissingOptuna as err:
        fail(str(err))
    began = time.time()
    ids = _submit(configs, epochs, examples)
    search = EarlyFeedback(ids, direction="minimize") if feedback else None
    jobs, sent, reached = _search(ids, goals, search, began, poll_s)
    title = f"automl: {trials} configurations, {epochs:g} epochs each"
    table, rows = _results(ids, configs, jobs, sent, title)
    console.print(table)
    for goal in goals:
        at = reached.get(goal)
        console.print(f"loss <= {goal:g}: " + ("not reached" if at is None else f"{at:.0f} s"))
    if json_path is not None:
        result = {
            "trials": rows,
            "seconds_to_target": {str(g): reached.get(g) for g in goals},
            "feedback": feedback,
            "seconds": time.time() - began,
        }
        json_path.write_text(json.dumps(result, indent=2) + "\n")
        console.print(f"wrote {json_path}")


_OVER = ("succeeded", "failed", "cancelled")


def _submit(configs: list[dict[str, Any]], epochs: float, examples: int) -> list[str]:
    """Each configuration as a job at priority 2; their ids, in order."""
    ids = []
    for i, config in enumerate(configs):
        spec = {
            "name": f"cfg{i:02d}",
            "command": COMMAND.format(epochs=epochs, examples=examples, **config),
            "epochs": epochs,
            "priority": 2,
        }
        ids.append(request_json("POST", "/jobs", json=spec)["id"])
    return ids


def _search(
    ids: list[str],
    goals: list[float],
    search: EarlyFeedback | None,
    began: float,
    poll_s: float,
) -> tuple[dict[str, Any], dict[str, int], dict[float, float]]:
    """Look every ``poll_s`` until every job is over: report the losses to ``search``
    and send the priorities it gives. The jobs as last seen, the priority each was
    sent, and the seconds at which the best loss first reached each goal."""
    sent = dict.fromkeys(ids, 2)
    reached: dict[float, float] = {}
    best = float("inf")
    with console.status("searching") as status:
        while True:
            jobs = {i: request_json("GET", job_path(i)) for i in ids}
            for job_id in ids:
                losses = _loss_by_epoch(request_json("GET", job_path(job_id, "/progress")))
                for epoch, loss in sorted(losses.items()):
                    best = min(best, loss)
                    if search is not None:
                        search.report(job_id, epoch, loss)
            now = time.time() - began
            for goal in goals:
                if best <= goal and goal not in reached:
                    reached[goal] = now
            if search is not None:
                for job_id, priority in search.priorities().items():
                    if priority != sent[job_id] and jobs[job_id]["state"] not in _OVER:
                        request("PATCH", job_path(job_id), json={"priority": priority})
                        sent[job_id] = priority
            status.update(
                f"searching: {now:.0f} s, best loss {best:.3f}, "
                f"{sum(j['state'] == 'succeeded' for j in jobs.values())}/{len(ids)} done"
            )
            if all(j["state"] in _OVER for j in jobs.values()):
                return jobs, sent, reached
            time.sleep(poll_s)


def _results(
    ids: list[str],
    configs: list[dict[str, Any]],
    jobs: dict[str, Any],
    sent: dict[str, int],
    title: str,
) -> tuple[Table, list[dict[str, Any]]]:
    """Each configuration's final loss, as a table to print and as rows to write."""
    table = Table(title=title)
    for col in ("job", "lr", "depth", "final loss", "priority", "state"):
        table.add_column(col, justify="left" if col == "job" else "right")
    rows = []
    for job_id, config in zip(ids, configs, strict=True):
        final = _loss_by_epoch(request_json("GET", job_path(job_id, "/progress")))
        last = final[max(final)] if final else None
        state = jobs[job_id]["state"]
        rows.append({"id": job_id, **config, "final_loss": last, "state": state})
        table.add_row(
            job_id,
            f"{config['lr']:.4g}",
            str(config["depth"]),
            "-" if last is None else f"{last:.3f}",
            str(sent[job_id]),
            state,
        )
    return table, rows
