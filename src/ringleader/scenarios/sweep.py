"""``ringleader sweep``: a grid of trace simulations, in parallel, into one tidy table.

The grid is every combination of trace × cluster size × load scale × policy ×
seed from a YAML file. A load scale ``s`` compresses arrival times by ``s``
(2.0 = twice the arrival rate, same jobs); a cluster size of ``null`` is the
trace's recommended size; seed 0 keeps the trace's arrivals exact, any other
seed jitters each arrival by up to ±60 s to show how much the result depends
on exact arrival order. Output: ``results.csv`` (one row per run) and plots:
average JCT against load, JCT CDFs and GPU utilisation over time.
"""

from __future__ import annotations

import csv
import os
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ringleader.inputs import field_path, load_yaml, output_dir_problem, read_capped
from ringleader.policy.catalog import POLICY_NAMES, policy_named
from ringleader.policy.model.views import ClusterView
from ringleader.sim.contention import GavelContention
from ringleader.sim.engine import Simulator
from ringleader.traces.jobs import GPUS_PER_NODE, recommended_gpus, to_sim_jobs
from ringleader.traces.load import TraceError, load_trace, resolve_trace

PLOTS = ("jct_vs_load.png", "jct_cdf.png", "utilization.png")


class SweepError(ValueError):
    """A sweep file that cannot be run; names the field and the fix."""


class SweepSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    traces: list[str] = Field(min_length=1)
    policies: list[str] = Field(min_length=1)
    gpus: list[Annotated[int, Field(ge=1, le=100_000)] | None] = Field([None], min_length=1)
    load_scale: list[Annotated[float, Field(gt=0, le=100, allow_inf_nan=False)]] = Field(
        [1.0], min_length=1
    )
    seeds: list[Annotated[int, Field(ge=0, le=2**32 - 1)]] = Field([0], min_length=1)
    out: str = Field("sweep-output", min_length=1)
    processes: Annotated[int, Field(ge=1, le=64)] | None = None
    tick_s: Annotated[float, Field(ge=0.01, le=86_400, allow_inf_nan=False)] | None = None
    """Decide once a tick over the events since, for every cell (``sim.ticks``); None: at
    every event. A large sweep runs several times faster at 60 s."""


@dataclass(frozen=True, slots=True)
class Cell:
    trace: str
    gpus: int | None
    load_scale: float
    policy: str
    seed: int
    tick_s: float | None = None


@dataclass(frozen=True, slots=True)
class Row:
    trace: str
    gpus: int
    load_scale: float
    policy: str
    seed: int
    jobs: int
    avg_jct_s: float
    p50_jct_s: float
    p95_jct_s: float
    p99_jct_s: float
    avg_queueing_s: float
    makespan_s: float
    utilization: float
    wall_s: float
    tick_s: float | None = None


CSV_DECIMALS = 4
"""Digits kept after the point in ``results.csv``: a tenth of a millisecond, and no float
noise (21684.199999999255 s is written 21684.2)."""


def _rounded(row: dict[str, object]) -> dict[str, object]:
    return {k: round(v, CSV_DECIMALS) if isinstance(v, float) else v for k, v in row.items()}


def load_sweep(path: Path) -> SweepSpec:
    try:
        data = load_yaml(read_capped(path, 1 << 20, "sweep file", SweepError))
    except yaml.YAMLError as err:
        raise SweepError(f"{path}: not valid YAML: {err}") from err
    try:
        spec = SweepSpec.model_validate(data)
    except ValidationError as err:
        lines = [f"  {field_path(e['loc'], '(sweep)')}: {e['msg']}" for e in err.errors()]
        raise SweepError(f"{path}: invalid sweep\n" + "\n".join(lines)) from None
    unknown = [p for p in spec.policies if p not in POLICY_NAMES]
    if unknown:
        raise SweepError(f"{path}: policies: unknown {unknown}; known: {', '.join(POLICY_NAMES)}")
    for trace in spec.traces:
        try:
            rows = load_trace(*resolve_trace(trace))
            to_sim_jobs(rows)
        except TraceError as err:
            raise SweepError(f"{path}: traces: {err}") from err
        widest = max(r.gpus for r in rows)
        small = [g for g in spec.gpus if g is not None and g < widest]
        if small:
            raise SweepError(
                f"{path}: gpus: {small} cannot run trace {trace}, whose widest job needs "
                f"{widest} GPUs; use at least {widest}, or null for the trace's own size"
            )
    _check_out(Path(spec.out), path)
    return spec


def _check_out(out: Path, path: Path) -> None:
    """Fail before hours of simulation, not after, if the results cannot be written."""
    if (why := output_dir_problem(out)) is not None:
        raise SweepError(f"{path}: out: {out} {why}")
    for name in ("results.csv", *PLOTS):
        if (out / name).is_dir():
            raise SweepError(
                f"{path}: out: {out / name} is a directory; move it or pick another out"
            )


def run_cell(cell: Cell) -> tuple[Row, list[float], list[tuple[float, int]]]:
    path, fmt = resolve_trace(cell.trace)
    rows = load_trace(path, fmt)
    gpus = cell.gpus if cell.gpus is not None else recommended_gpus(rows)
    jobs = to_sim_jobs(rows)
    start = min(j.submitted_at for j in jobs)
    rng = np.random.default_rng(cell.seed)
    shifted = []
    for j in jobs:
        at = start + (j.submitted_at - start) / cell.load_scale
        if cell.seed:
            at = max(start, at + float(rng.uniform(-60, 60)))
        shifted.append(replace(j, submitted_at=at))
    nodes, extra = divmod(gpus, GPUS_PER_NODE)
    cluster = (
        ClusterView.uniform(nodes, GPUS_PER_NODE) if extra == 0 else ClusterView.uniform(1, gpus)
    )
    started = time.perf_counter()
    result = Simulator(
        policy_named(cell.policy),
        cluster,
        shifted,
        contention=GavelContention(),
        tick_s=cell.tick_s,
    ).run()
    s = result.summary
    row = Row(
        cell.trace,
        gpus,
        cell.load_scale,
        cell.policy,
        cell.seed,
        s.jobs,
        s.avg_jct_s,
        s.p50_jct_s,
        s.p95_jct_s,
        s.p99_jct_s,
        s.avg_queueing_s,
        s.makespan_s,
        s.utilization,
        time.perf_counter() - started,
        cell.tick_s,
    )
    jcts = [r.jct for r in result.records if r.jct is not None]
    usage = [(p.time - start, p.busy) for p in result.usage]
    if len(usage) > 2000:  # enough for a plot
        usage = usage[:: len(usage) // 2000]
    return row, jcts, usage


def run_sweep(spec: SweepSpec, on_done: Callable[[Row], None] | None = None) -> list[Row]:
    cells = [
        Cell(t, g, ls, p, s, spec.tick_s)
        for t in spec.traces
        for g in spec.gpus
        for ls in spec.load_scale
        for p in spec.policies
        for s in spec.seeds
    ]
    out = Path(spec.out)
    out.mkdir(parents=True, exist_ok=True)
    workers = spec.processes or min(len(cells), os.cpu_count() or 1)
    rows: list[Row] = []
    jcts: dict[tuple[str, str, float], list[float]] = {}
    usage: dict[tuple[str, str, float], list[tuple[float, int]]] = {}
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(run_cell, c): c for c in cells}
        for future in as_completed(futures):
            try:
                row, values, busy = future.result()
            except (ValueError, RuntimeError) as err:  # TraceError, SimulationStalled, ...
                for other in futures:
                    other.cancel()
                cell = futures[future]
                raise SweepError(
                    f"{cell.trace}, {cell.gpus or 'recommended'} GPUs, load {cell.load_scale:g}, "
                    f"{cell.policy}, seed {cell.seed}: {err}"
                ) from None
            rows.append(row)
            key = (row.trace, row.policy, row.load_scale)
            jcts.setdefault(key, []).extend(values)
            if row.seed == min(spec.seeds):
                usage[key] = busy
            if on_done is not None:
                on_done(row)
    rows.sort(key=lambda r: (r.trace, r.gpus, r.load_scale, r.policy, r.seed))
    with open(out / "results.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(Row.__dataclass_fields__))
        writer.writeheader()
        for row in rows:
            writer.writerow(_rounded(asdict(row)))
    _plots(rows, jcts, usage, out)
    return rows


def _plots(
    rows: list[Row],
    jcts: dict[tuple[str, str, float], list[float]],
    usage: dict[tuple[str, str, float], list[tuple[float, int]]],
    out: Path,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ringleader.report.plots import BINS, binned_mean, jct_cdf_grid, save_figure

    traces = sorted({r.trace for r in rows})
    fig, axes = plt.subplots(1, len(traces), figsize=(5 * len(traces), 4), squeeze=False)
    for ax, trace in zip(axes[0], traces, strict=True):
        for policy in sorted({r.policy for r in rows}):
            mine = [r for r in rows if r.trace == trace and r.policy == policy]
            loads = sorted({r.load_scale for r in mine})
            means = [
                np.mean([r.avg_jct_s for r in mine if r.load_scale == x]) / 3600 for x in loads
            ]
            ax.plot(loads, means, "o-", label=policy)
        ax.set_title(trace)
        ax.set_xlabel("load scale (arrival rate ×)")
        ax.set_ylabel("average JCT (hours)")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize="small")
    save_figure(fig, out / "jct_vs_load.png")
    base = min({r.load_scale for r in rows}, key=lambda x: abs(x - 1.0))
    panels: dict[str, dict[str, Any]] = {
        trace: {
            p: [v / 3600 for v in jcts.get((trace, p, base), [])]
            for p in sorted({r.policy for r in rows})
        }
        for trace in traces
    }
    jct_cdf_grid(panels, out / "jct_cdf.png", title=f"JCT CDFs at load scale {base:g}")
    gpus = {r.trace: r.gpus for r in rows}
    policies = sorted({r.policy for r in rows})
    fig, axes = plt.subplots(
        len(policies),
        len(traces),
        figsize=(5 * len(traces), 1.2 + 1.3 * len(policies)),
        squeeze=False,
        sharex="col",
        sharey=True,
    )
    # One row a policy: work-conserving policies keep the same GPUs busy most of the
    # time, so their lines on one axis hide each other.
    for col, trace in enumerate(traces):
        runs = {p: usage.get((trace, p, base), []) for p in policies}
        end = max((s[-1][0] for s in runs.values() if s), default=0.0)
        for row, policy in enumerate(policies):
            ax = axes[row][col]
            steps = [(t / 3600, b / gpus[trace]) for t, b in runs[policy]]
            hours, busy = binned_mean(steps, end / 3600)
            if len(hours):
                ax.fill_between(hours, busy, color=f"C{row}", alpha=0.5, linewidth=0)
                ax.plot(hours, busy, color=f"C{row}", linewidth=1)
                ax.set_title(
                    f"{trace}, {policy}: mean {float(np.mean(busy)):.2f}", fontsize="small"
                )
            ax.set_ylim(0, 1.05)
            ax.grid(alpha=0.3)
            if col == 0:
                ax.set_ylabel("GPUs busy")
        axes[-1][col].set_xlabel(f"hours since first arrival (load {base:g})")
    fig.suptitle(f"GPUs busy as a fraction of the cluster, mean of each 1/{BINS} of the run")
    save_figure(fig, out / "utilization.png")
