"""``ringleader simulate --scenario NAME``: each scenario registers itself here.

A scenario is a function of a ``ScenarioRequest`` that runs its simulations,
prints its table beside the paper's, and writes ``--json`` and ``--plot``;
``@scenario(NAME, ...)`` adds it to ``SCENARIOS``, which is all the command
line knows of it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.table import Table

from ringleader.cli.errors import fail, write_json
from ringleader.cli.reporting import console, progress_bar, write_plot


@dataclass(frozen=True, slots=True)
class ScenarioRequest:
    seeds: int
    json_path: Path | None
    plot: Path | None
    processes: int | None
    fifo_model: str = "drain"
    load: float | None = None
    """Only this load, where the scenario sweeps loads (``--load``)."""
    policy: str | None = None
    """Only this one of the scenario's policies (``--policy``)."""


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    summary: str
    run: Callable[[ScenarioRequest], None]


SCENARIOS: dict[str, Scenario] = {}


Runner = Callable[[ScenarioRequest], None]


def scenario(name: str, summary: str) -> Callable[[Runner], Runner]:
    """Register the decorated function as the scenario ``name``."""

    def register(run: Runner) -> Runner:
        SCENARIOS[name] = Scenario(name, summary, run)
        return run

    return register


@scenario("table3", "the ring-allreduce seed's Table 3: six strategies at three loads")
def table3(req: ScenarioRequest) -> None:
    seeds, processes = req.seeds, req.processes
    from ringleader.scenarios.table3 import LOADS, PAPER_HOURS, STRATEGIES, run_table3

    total = seeds * len(LOADS) * len(STRATEGIES)
    with progress_bar() as bar:
        task = bar.add_task(f"table3: {total} simulations", total=total)
        result = run_table3(seeds, processes=processes, on_done=lambda _: bar.advance(task))
    for load, (gap, count) in LOADS.items():
        table = Table(
            title=f"{load}: {count} jobs, mean gap {gap:.0f} s — average JCT (hours)",
            caption=f"ours: mean ± 95% CI over {seeds} seeds",
        )
        for name in ("strategy", "ours", "paper", "ours/precompute", "paper/precompute"):
            table.add_column(name, justify="left" if name == "strategy" else "right")
        for s in STRATEGIES:
            paper = PAPER_HOURS[s][load]
            table.add_row(
                s,
                f"{result.mean(s, load):.2f} ± {result.ci95(s, load):.2f}",
                f"{paper:.2f}",
                f"{result.ratio(s, load):.2f}",
                f"{paper / PAPER_HOURS['precompute'][load]:.2f}",
            )
        console.print(table)
    payload = result.as_json()
    console.print(
        f"peak jobs in system: {payload['peak_concurrency']} (paper: 125 / 59 / 20); "
        "see docs/table3.md for what differs and why"
    )

    def draw(path: Path) -> object:
        from ringleader.report.plots import jct_cdf_grid

        panels = {
            f"{load} (gap {LOADS[load][0]:.0f}s)": {s: result.jcts(s, load) for s in STRATEGIES}
            for load in LOADS
        }
        title = f"Table 3 scenario: JCT CDFs, {seeds} seeds pooled"
        return jct_cdf_grid(panels, path, title=title)

    _save(req, payload, draw)


@scenario("gandiva-cluster", "Gandiva's cluster experiment: sharing against no sharing")
def gandiva_cluster(req: ScenarioRequest) -> None:
    _sharing("gandiva-cluster", req)


@scenario("automl", "Gandiva's AutoML experiment: a hyper-parameter search with priorities")
def automl(req: ScenarioRequest) -> None:
    _sharing("automl", req)


def _sharing(scenario: str, req: ScenarioRequest) -> None:
    seeds, processes = req.seeds, req.processes
    from ringleader.scenarios.automl import MissingOptuna, run_automl
    from ringleader.scenarios.gandiva import ClusterSetup, run_cluster

    result: dict[str, object]
    with progress_bar() as bar:
        task = bar.add_task(f"{scenario}: {2 * seeds} simulations", total=2 * seeds)
        if scenario == "automl":
            try:
                result = run_automl(seeds, workers=processes, on_done=lambda: bar.advance(task))
            except MissingOptuna as err:
                fail(str(err))
        else:
            report = run_cluster(
                ClusterSetup(), seeds, workers=processes, on_done=lambda: bar.advance(task)
            )
            result = report.as_json()
    ours, paper, ci = result["ours"], result["paper"], result["ci95"]
    assert isinstance(ours, dict) and isinstance(paper, dict) and isinstance(ci, dict)
    table = Table(title=f"{scenario}: Gandiva stack against no sharing, {seeds} seeds")
    for col in ("metric", "ours", "± 95% CI", "paper"):
        table.add_column(col, justify="left" if col == "metric" else "right")
    for key in ours:
        table.add_row(key, f"{ours[key]:.2f}", f"{ci[key]:.2f}", f"{paper[key]:g}")
    console.print(table)
    detail = result.get("policies") or result.get("minutes")
    if isinstance(detail, dict):
        for name, values in detail.items():
            shown = ", ".join(
                f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in values.items()
            )
            console.print(f"  {name}: {shown}")
    console.print("model and what differs from the seed: docs/gandiva.md")

    def draw(path: Path) -> object:
        from ringleader.report.plots import sharing_plot

        return sharing_plot(result, path)

    _save(req, result, draw)


@scenario("tensorlights", "TensorLights: 21 parameter-server jobs, FIFO against priorities")
def tensorlights(req: ScenarioRequest) -> None:
    seeds, fifo_model = req.seeds, req.fifo_model
    from ringleader.scenarios.tensorlights import (
        HOSTS_PER_PLACEMENT,
        FifoModel,
        run_tensorlights,
    )

    models = [m.value for m in FifoModel]
    if fifo_model not in models:
        fail(f"--fifo-model: unknown model {fifo_model!r}; choose one of: {', '.join(models)}")
    with console.status(
        f"tensorlights ({fifo_model} FIFO): 21 jobs x 8 placements x 3 policies x {seeds} seeds"
    ):
        result = run_tensorlights(seeds, FifoModel(fifo_model))
    ours, paper = result["ours"], result["paper"]
    assert isinstance(ours, dict) and isinstance(paper, dict)
    table = Table(
        title="TensorLights: 21 PS jobs (1 PS + 20 workers), 10 Gbps, skewed -> uniform",
        caption=f"FIFO model: {fifo_model}",
    )
    for col in (
        "placement",
        "PS hosts",
        "FIFO JCT s",
        "paper",
        "One norm",
        "paper",
        "RR norm",
        "paper",
    ):
        table.add_column(col, justify="right")
    for i, hosts in enumerate(HOSTS_PER_PLACEMENT):

        def p(key: str, i: int = i) -> str:
            values = paper[key]
            return f"{values[i]:g}" if i < len(values) else "-"

        table.add_row(
            f"#{i + 1}",
            str(hosts),
            f"{ours['fifo_jct_s'][i]:.0f}",
            p("fifo_jct_s"),
            f"{ours['one_norm'][i]:.2f}",
            p("one_norm"),
            f"{ours['rr_norm'][i]:.2f}",
            p("rr_norm"),
        )
    console.print(table)
    console.print("model and what differs from the seed: docs/tensorlights.md")

    def draw(path: Path) -> object:
        from ringleader.report.plots import tensorlights_plot

        return tensorlights_plot(result, path)

    _save(req, result, draw)


@scenario("heterogeneity", "Gavel's 36-GPU V100/P100/K80 cluster: type-aware against agnostic")
def heterogeneity(req: ScenarioRequest) -> None:
    from ringleader.scenarios.heterogeneity import (
        LOADS,
        POLICIES,
        goals,
        run_heterogeneity,
    )

    loads = LOADS if req.load is None else (req.load,)
    policies = POLICIES if req.policy is None else (req.policy,)
    if req.policy is not None and req.policy not in POLICIES:
        fail(
            f"--policy: the heterogeneity scenario compares {' and '.join(POLICIES)}, "
            f"not {req.policy!r}; for another policy on these GPU types, use --trace with "
            "--gpu-types v100:1,p100:1,k80:1"
        )
    total = req.seeds * len(loads) * len(policies) * 2
    with progress_bar() as bar:
        task = bar.add_task(f"heterogeneity: {total} simulations", total=total)
        cells = run_heterogeneity(
            req.seeds,
            loads,
            policies,
            processes=req.processes,
            on_done=lambda _: bar.advance(task),
        )
    table = Table(
        title="heterogeneity: 36 GPUs (12 V100, 12 P100, 12 K80), Gavel's job types",
        caption=f"mean ± 95% CI over {req.seeds} seeds; unstable: the backlog keeps growing",
    )
    for col in ("policy", "placement", "jobs/h", "avg JCT h", "makespan h", "fairness", "stable"):
        table.add_column(col, justify="left" if col in ("policy", "placement") else "right")
    for c in cells:
        table.add_row(
            c.policy,
            "type-aware" if c.type_aware else "agnostic",
            f"{c.load:g}",
            f"{c.avg_jct_s / 3600:.1f}"
            + ("" if math.isnan(c.ci95_s) else f" ± {c.ci95_s / 3600:.1f}"),
            f"{c.makespan_s / 3600:.0f}",
            f"{c.fairness:.2f}",
            "yes" if c.stable else "no",
        )
    console.print(table)
    checks = goals(cells)
    gain = checks["gain"]
    assert isinstance(gain, dict)
    for policy, g in gain.items():
        console.print(
            f"{policy}: at {g['load']:g} jobs/h, the highest load its agnostic variant keeps "
            f"up with, type-aware avg JCT is {g['ratio']:.2f}x the agnostic's (goal <= 0.6; "
            "Gavel reports up to 3.5x lower)"
        )
    console.print("model and what differs from Gavel: docs/heterogeneity.md")
    results = [c.as_dict() for c in cells]

    def draw(path: Path) -> object:
        from ringleader.report.plots import heterogeneity_plot

        return heterogeneity_plot(results, path)

    _save(req, {"results": results, "goals": checks, "seeds": req.seeds}, draw)


def _save(req: ScenarioRequest, payload: object, draw: Callable[[Path], object]) -> None:
    """Write ``--json`` (``payload``) and ``--plot`` (``draw(path)``), where asked for."""
    if req.json_path is not None:
        write_json("--json", req.json_path, payload)
        console.print(f"wrote {req.json_path}")
    if req.plot is not None:
        plot = req.plot
        write_plot(plot, lambda: draw(plot))


@scenario(
    "llm-cluster",
    "a Llama 3-sized pre-training gang among research jobs for 54 days, nodes failing",
)
def llm_cluster(req: ScenarioRequest) -> None:
    from ringleader.scenarios.llm_cluster import (
        VARIANTS,
        GangMix,
        LlmCluster,
        run_llm_cluster,
        run_placements,
    )

    setup, mix = LlmCluster(), GangMix()
    with progress_bar() as bar:
        task = bar.add_task(f"llm-cluster: {len(VARIANTS)} simulations", total=len(VARIANTS))
        rows = run_llm_cluster(
            setup, VARIANTS, processes=req.processes, on_done=lambda _: bar.advance(task)
        )
    with console.status("llm-cluster: placement rules on a gang-heavy mix"):
        placements = run_placements(mix, req.seeds, processes=req.processes)
    gang = f"{setup.gang_gpus:,}-GPU gang"
    table = Table(
        title=f"llm-cluster: a {gang} and {setup.research_jobs} research jobs, "
        f"{setup.days:g} days, Llama 3's failure rates",
        caption="Llama 3 report: 419 unexpected interruptions in 54 days, ETTR above 0.90",
    )
    for col in (
        "variant",
        "GPUs",
        "interruptions",
        "ETTR",
        "lost h: fail/ckpt/restart/wait",
        "cluster ETTR",
        "research JCT h",
    ):
        table.add_column(col, justify="left" if col == "variant" else "right")
    for r in rows:
        lost = r["gang_lost_h"]
        assert isinstance(lost, dict)
        table.add_row(
            str(r["variant"]),
            f"{r['gpus']:,}",
            str(r["gang_interruptions"]),
            f"{r['gang_ettr']:.3f}",
            " / ".join(f"{lost[c]:.0f}" for c in ("failure", "checkpoint", "restart", "queueing")),
            f"{r['cluster_ettr']:.3f}",
            f"{r['research_avg_jct_h']:.2f}",
        )
    console.print(table)
    racks = Table(
        title=f"placement: {mix.jobs} gangs of 64-1,024 GPUs on {mix.racks} racks of "
        f"{mix.nodes_per_rack * mix.gpus_per_node} GPUs, 4x slower between racks",
        caption=f"mean over {req.seeds} seeds; the default policy, no failures",
    )
    for col in ("placement", "avg JCT h", "over blind"):
        racks.add_column(col, justify="left" if col == "placement" else "right")
    for r in placements:
        racks.add_row(str(r["placement"]), f"{r['avg_jct_h']:.2f}", f"{r['over_blind']:.3f}")
    console.print(racks)
    console.print("model, calibration and what differs from the report: docs/failures.md")

    def draw(path: Path) -> object:
        from ringleader.report.plots import failures_plot

        return failures_plot(rows, placements, path)

    payload = {"setup": asdict(setup), "rows": rows, "mix": asdict(mix), "placements": placements}
    _save(req, payload, draw)
