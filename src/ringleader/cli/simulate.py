"""``ringleader simulate``: reproduce a seed's table, or play your own workload.

The command checks its flags and hands over: a scenario to ``cli.scenarios``, a
trace to ``cli.simulate_trace``, a workload file to ``cli.simulate_workload``, a
Pollux CSV to ``cli.simulate_pollux``; each imported only when it is the one run, so
a short simulation does not pay for the others' imports.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ringleader.cli.errors import check_output_file, fail
from ringleader.policy.catalog import POLICY_NAMES, has_type_variant, policy_named, with_types

SCENARIO_NAMES = "table3, tensorlights, gandiva-cluster, automl, heterogeneity"
"""For --help without importing the scenarios (``ringleader.cli.scenarios`` registers them)."""


MAX_SEEDS = 10_000
MAX_PROCESSES = 64

# The command's flags, one type each: the help a flag's parameter shows.
ScenarioFlag = Annotated[
    str | None,
    typer.Option(help=f"A named scenario that reproduces a published table: {SCENARIO_NAMES}."),
]
WorkloadFlag = Annotated[
    Path | None,
    typer.Option(help="A workload YAML file (cluster, models, jobs); see examples/."),
]
TraceFlag = Annotated[
    str | None,
    typer.Option(help="A trace file, or a bundled one: itp:cluster07, gavel:0e4a51, ..."),
]
PolluxFlag = Annotated[
    str | None,
    typer.Option(
        "--pollux",
        help="A Pollux workload CSV (name,time,application,num_replicas,batch_size), played "
        "on Pollux's testbed (16 x 4 GPUs, 60 s rounds, 30 s restarts), or a bundled one: "
        "pollux:workload-1 .. pollux:workload-8, pollux:workload-1:1.5 for another load "
        "(0.5, 1.5, 2.0), printed beside the JCT Pollux's simulator published.",
    ),
]
ProfilesFlag = Annotated[
    Path | None,
    typer.Option(
        help="--pollux: the profiles folder, one subfolder per application (placements.csv, "
        "scalability.csv, validation-<batch>.csv); default: Pollux's, bundled."
    ),
]
FormatFlag = Annotated[
    str | None, typer.Option("--format", help="itp | itp-elasticflow | gavel (guessed).")
]
GpusFlag = Annotated[
    int | None,
    typer.Option(min=1, help="Cluster GPUs for --trace (default: sized to ~80% load)."),
]
PolicyFlag = Annotated[
    str | None,
    typer.Option(
        help=f"Policy for --workload/--trace/--pollux: {', '.join(POLICY_NAMES)}. With "
        "--scenario heterogeneity: only this one of its policies (tiresias, ringleader)."
    ),
]
LoadFlag = Annotated[
    float | None,
    typer.Option(
        min=0.01,
        max=1000,
        help="--scenario heterogeneity: only this load, in jobs per hour (default: its sweep, "
        "0.3 to 1.35); with --policy and --seeds 1, one point of the sweep.",
    ),
]
SeedsFlag = Annotated[
    int | None,
    typer.Option(
        min=1, help="Arrival seeds per scenario cell (default 10; tensorlights 3; llm-cluster 2)."
    ),
]
JsonFlag = Annotated[Path | None, typer.Option("--json", help="Write the results as JSON here.")]
PlotFlag = Annotated[Path | None, typer.Option(help="Write a PNG plot here.")]
ProcessesFlag = Annotated[
    int | None, typer.Option(min=1, help="Parallel processes (default: one per core).")
]
FifoModelFlag = Annotated[
    str,
    typer.Option(
        help="tensorlights: how FIFO interleaving delays a job: drain (nobody finishes "
        "before the host's backlog empties) or fair (equal shares). See docs/tensorlights.md."
    ),
]
QuantumFlag = Annotated[
    float | None,
    typer.Option(
        min=0.1,
        max=86_400,
        help="Time-slicing quantum: gandiva (default 60), ringleader's last queue (600).",
    ),
]
ThresholdsFlag = Annotated[
    str | None,
    typer.Option(
        help="Attained-service queue thresholds in GPU-seconds for tiresias/ringleader, "
        "comma-separated and rising, e.g. 3600,36000 (empty: one queue)."
    ),
]
GpuTypesFlag = Annotated[
    str | None,
    typer.Option(
        help="--trace on mixed GPU types: each type's share of the nodes, e.g. "
        "v100:1,p100:1,k80:1 (types with measured speeds: v100, p100, k80)."
    ),
]
TypeAgnosticFlag = Annotated[
    bool,
    typer.Option(
        "--type-agnostic",
        help="Place blind to GPU types (the policy's type-agnostic variant), to compare.",
    ),
]
TickFlag = Annotated[
    float | None,
    typer.Option(
        min=0.01,
        max=86_400,
        help="--workload/--trace: decide once every this many simulated seconds, over "
        "every event since, as the runtime's controller does once a tick (default: at "
        "every event; a workload file's simulation.tick_s). A tick of 60 plays a large "
        "trace many times faster, at a small cost in queueing (docs/scale.md).",
    ),
]


def simulate(
    scenario: ScenarioFlag = None,
    workload: WorkloadFlag = None,
    trace: TraceFlag = None,
    trace_format: FormatFlag = None,
    gpus: GpusFlag = None,
    policy: PolicyFlag = None,
    seeds: SeedsFlag = None,
    json_path: JsonFlag = None,
    plot: PlotFlag = None,
    processes: ProcessesFlag = None,
    fifo_model: FifoModelFlag = "drain",
    quantum_s: QuantumFlag = None,
    tiresias_thresholds: ThresholdsFlag = None,
    gpu_types: GpuTypesFlag = None,
    type_agnostic: TypeAgnosticFlag = False,
    tick_s: TickFlag = None,
    pollux_workload: PolluxFlag = None,
    profiles: ProfilesFlag = None,
    load: LoadFlag = None,
) -> None:
    """Run the simulator: the same policy core the runtime uses, on a virtual clock.

    Either --scenario NAME (for example `table3`, the ring-allreduce paper's
    Table 3: six strategies × three loads × --seeds arrival seeds, printed beside
    the paper's numbers), --workload FILE --policy NAME, --trace TRACE --policy
    NAME, or --pollux CSV --policy NAME (Pollux's workloads and profiles).
    """
    if sum(x is not None for x in (scenario, workload, trace, pollux_workload)) != 1:
        fail("give exactly one of --scenario NAME, --workload FILE, --trace TRACE or --pollux CSV")
    if profiles is not None and pollux_workload is None:
        fail("--profiles applies to --pollux (a workload file holds its own models)")
    if json_path is not None:
        check_output_file("--json", json_path)
    if plot is not None:
        check_output_file("--plot", plot, needs_suffix=True)
    if seeds is None:
        seeds = {"tensorlights": 3, "heterogeneity": 3, "llm-cluster": 2}.get(scenario or "", 10)
    _check_flags(seeds, processes, scenario, trace, gpu_types, type_agnostic, tick_s)
    if load is not None and scenario != "heterogeneity":
        fail("--load applies to --scenario heterogeneity (a workload file states its arrivals)")
    _check_type_variant(policy, type_agnostic)
    if pollux_workload is not None:
        if tick_s is not None or type_agnostic:
            fail("--tick-s and --type-agnostic do not apply to --pollux: it decides every 60 s")
        _run_pollux(
            pollux_workload, profiles, policy, quantum_s, tiresias_thresholds, json_path, plot
        )
        return
    if trace is not None:
        if policy is None:
            fail(f"--trace needs --policy NAME; choose one of: {', '.join(POLICY_NAMES)}")
        from ringleader.cli.simulate_policy import policy_for
        from ringleader.cli.simulate_trace import play_trace

        chosen = policy_for(policy, quantum_s, tiresias_thresholds, None)
        named = chosen.name if not type_agnostic else f"{policy} (type-agnostic)"
        play_trace(
            *(trace, trace_format, gpus, with_types(chosen, not type_agnostic), named),
            *(json_path, plot, gpu_types, tick_s),
        )
        return
    if scenario is not None:
        if quantum_s is not None or tiresias_thresholds is not None:
            fail(
                "--quantum-s and --tiresias-thresholds apply to --workload, --trace and "
                "--pollux; a scenario runs its own strategies"
            )
        _run_scenario(
            scenario, seeds, json_path, plot, processes, fifo_model, load=load, policy=policy
        )
        return
    assert workload is not None
    if policy is None:
        fail(f"--workload needs --policy NAME; choose one of: {', '.join(POLICY_NAMES)}")
    from ringleader.cli.simulate_workload import play_workload

    play_workload(
        workload, policy, quantum_s, tiresias_thresholds, json_path, plot, type_agnostic, tick_s
    )


def _run_pollux(
    workload: str,
    profiles: Path | None,
    policy: str | None,
    quantum_s: float | None,
    thresholds: str | None,
    json_path: Path | None,
    plot: Path | None,
) -> None:
    if policy is None:
        fail(f"--pollux needs --policy NAME; choose one of: {', '.join(POLICY_NAMES)}")
    from ringleader.cli.simulate_pollux import play_pollux

    play_pollux(workload, profiles, policy, quantum_s, thresholds, json_path, plot)


def _run_scenario(
    scenario: str,
    seeds: int,
    json_path: Path | None,
    plot: Path | None,
    processes: int | None,
    fifo_model: str,
    *,
    load: float | None,
    policy: str | None,
) -> None:
    from ringleader.cli.scenarios import SCENARIOS, ScenarioRequest

    if policy is not None and scenario != "heterogeneity":
        fail(
            "--policy applies to --workload, --trace, --pollux and --scenario "
            "heterogeneity; this scenario runs its own strategies"
        )
    chosen = SCENARIOS.get(scenario)
    if chosen is None:
        fail(f"--scenario: unknown scenario {scenario!r}; choose one of: {', '.join(SCENARIOS)}")
    chosen.run(ScenarioRequest(seeds, json_path, plot, processes, fifo_model, load, policy))


def _check_type_variant(policy: str | None, type_agnostic: bool) -> None:
    """Fail where ``--type-agnostic`` would change nothing: a policy with no type stage."""
    if not type_agnostic or policy not in POLICY_NAMES:
        return
    if not has_type_variant(policy_named(policy)):
        fail(
            f"--type-agnostic: policy {policy} has no type stage to turn off (it picks GPU "
            "types its own way), so the flag would change nothing; drop it, or compare a "
            "composed policy such as ringleader, tiresias or gavel-mmf"
        )


def _check_flags(
    seeds: int,
    processes: int | None,
    scenario: str | None,
    trace: str | None,
    gpu_types: str | None,
    type_agnostic: bool,
    tick_s: float | None,
) -> None:
    """Fail on a flag out of its bounds, or one the run it is given to does not use."""
    if seeds > MAX_SEEDS:
        fail(
            f"--seeds: {seeds} is more than {MAX_SEEDS}; confidence intervals are tight long before"
        )
    if processes is not None and processes > MAX_PROCESSES:
        fail(f"--processes: {processes} is more than {MAX_PROCESSES}")
    if gpu_types is not None and trace is None:
        fail("--gpu-types applies to --trace (a workload file names its types under cluster)")
    if type_agnostic and scenario is not None:
        fail("--type-agnostic applies to --workload and --trace; a scenario runs both variants")
    if tick_s is not None and scenario is not None:
        fail("--tick-s applies to --workload and --trace; a scenario decides as its paper did")
