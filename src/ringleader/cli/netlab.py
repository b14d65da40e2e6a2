"""``ringleader netlab``: measure TensorLights on real sockets in network namespaces."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ringleader.cli.errors import check_output_file, fail

console = Console(highlight=False)


def netlab(
    policy: Annotated[str, typer.Option(help="fifo | one | rr (RoundRobin).")] = "one",
    jobs: Annotated[int, typer.Option(min=1, max=50, help="Parameter-server jobs.")] = 3,
    placement: Annotated[
        str, typer.Option(help="skewed (all PSes on one host) | uniform (one per host).")
    ] = "skewed",
    repeat: Annotated[int, typer.Option(min=1, help="Repetitions (seeds 0..K-1).")] = 1,
    workers: Annotated[int, typer.Option(min=1, max=32, help="Workers per job.")] = 4,
    steps: Annotated[int, typer.Option(min=1, help="Synchronous steps per job.")] = 30,
    link_mbit: Annotated[float, typer.Option(help="PS host uplink rate.")] = 100.0,
    model_kb: Annotated[int, typer.Option(min=1, help="Model update per worker (KB).")] = 500,
    compute_ms: Annotated[float, typer.Option(help="Worker compute per step.")] = 50.0,
    rr_interval_s: Annotated[float, typer.Option(help="RoundRobin rotation period.")] = 2.0,
    json_path: Annotated[Path | None, typer.Option("--json", help="Write results here.")] = None,
) -> None:
    """Build namespaces, run emulated PS jobs under a traffic policy, measure, tear down.

    Needs root (CAP_NET_ADMIN). Everything it creates — namespaces, veths, the
    bridge, qdiscs, processes — is removed when it ends, also on Ctrl-C. All
    traffic stays inside its own namespaces (10.250.0.0/16 exists only there).
    """
    from ringleader.net.netlab import NetlabConfig, run_netlab
    from ringleader.net.tc import NetCommandError, have_net_admin
    from ringleader.policy.traffic import TrafficPolicy

    if json_path is not None:
        check_output_file("--json", json_path)
    for name, value in (
        ("--link-mbit", link_mbit),
        ("--compute-ms", compute_ms),
        ("--rr-interval-s", rr_interval_s),
    ):
        if not (math.isfinite(value) and value > 0):
            fail(f"{name}: {value} must be a positive number")
    try:
        chosen = TrafficPolicy(policy)
    except ValueError:
        fail(f"--policy: {policy!r} is not one of fifo, one, rr")
    if placement not in ("skewed", "uniform"):
        fail(f"--placement: {placement!r} is not one of skewed, uniform")
    ok, why = have_net_admin()
    if not ok:
        fail(f"netlab {why}")
    config = NetlabConfig(
        chosen,
        jobs=jobs,
        placement=placement,  # type: ignore[arg-type]
        workers=workers,
        steps=steps,
        link_mbit=link_mbit,
        model_bytes=model_kb * 1000,
        compute_ms=compute_ms,
        rr_interval_s=rr_interval_s,
    )
    try:
        with console.status(f"netlab: {policy}, {placement}, {jobs} jobs × {repeat}"):
            result = run_netlab(config, repeat)
    except (NetCommandError, RuntimeError, TimeoutError) as err:
        fail(f"netlab run failed (everything it created was removed): {err}")
    console.print(
        f"{policy} / {placement}: average JCT {result['avg_jct_s']:.2f} s over {repeat} run(s); "
        f"barrier-wait variance {result['barrier_wait_var'] * 1e6:.0f} ms²"
    )
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(result, indent=2) + "\n")
        console.print(f"wrote {json_path}")
