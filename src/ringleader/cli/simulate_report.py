"""What ``ringleader simulate`` prints of one run: its summary, and each user's share."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from ringleader.cli.reporting import console
from ringleader.sim.failures import Failures
from ringleader.sim.result import SimResult


def print_summary(result: SimResult, gpus: int) -> None:
    s = result.summary
    table = Table(title=f"policy {result.policy} on {gpus} GPUs")
    table.add_column("metric")
    table.add_column("value", justify="right")
    rows = [
        ("jobs finished", f"{s.finished} / {s.jobs}"),
        ("average JCT", f"{s.avg_jct_s / 3600:.3f} h"),
        (
            "p50 / p95 / p99 JCT",
            f"{s.p50_jct_s / 3600:.2f} / {s.p95_jct_s / 3600:.2f} / {s.p99_jct_s / 3600:.2f} h",
        ),
        ("average queueing", f"{s.avg_queueing_s / 3600:.3f} h"),
        ("makespan", f"{s.makespan_s / 3600:.2f} h"),
        ("GPU utilisation", f"{s.utilization:.1%}"),
        ("peak jobs in system", str(s.peak_jobs)),
        (
            "resizes / migrations / suspends",
            " / ".join(str(result.counts.get(k, 0)) for k in ("resize", "migration", "suspend")),
        ),
        ("simulation wall time", f"{result.wall_s:.2f} s ({result.decisions} decisions)"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    console.print(table)


def print_users(result: Any, capacity: int, weights: dict[str, float]) -> list[dict[str, Any]]:
    """Each user's GPU time against their fair share, where the run had several users."""
    from ringleader.fairness import by_user

    rows = by_user(result.shares, capacity, weights=weights)
    if not rows:
        return []
    table = Table("user", "GPU-h", "fair GPU-h", "worst hour")
    out = []
    for r in rows:
        worst = "-" if r.worst_hour is None else f"{r.worst_hour:.0%}"
        table.add_row(
            r.user or "(none)", f"{r.gpu_s / 3600:.1f}", f"{r.fair_gpu_s / 3600:.1f}", worst
        )
        out.append(
            {
                "user": r.user,
                "gpu_h": round(r.gpu_s / 3600, 3),
                "fair_gpu_h": round(r.fair_gpu_s / 3600, 3),
                "worst_hour": None if r.worst_hour is None else round(r.worst_hour, 4),
            }
        )
    console.print(table)
    console.print(
        "worst hour: the least GPU time a user got in any hour with jobs waiting or "
        "running, as a share of their fair share (weighted max-min over what their jobs "
        "could use)",
        style="dim",
    )
    return out


def job_rows(result: SimResult) -> list[dict[str, Any]]:
    """Each job's times for ``--json``: when it came, started and ended, why it waited,
    and ``gpus``: ``[time, GPUs]`` at each change of the GPUs running its workers."""
    return [
        {
            "id": r.id,
            "submitted_at": r.submitted_at,
            "started_at": r.started_at,
            "finished_at": r.finished_at,
            "jct_s": r.jct,
            "resizes": r.resizes,
            "waited_s": {
                code: round(seconds, 3)
                for code, seconds in sorted(result.waits.get(r.id, {}).items())
            },
            "gpus": [[round(t, 3), n] for t, n in result.gpus.get(r.id, ())],
        }
        for r in result.records
    ]


def print_failures(failures: Failures) -> dict[str, Any]:
    """What failures and checkpoints cost the run: interruptions by cause, ETTR, and the
    GPU-hours lost to each cause; the same as a dict, for ``--json``."""
    whole = failures.cluster_ledger()
    causes = ", ".join(f"{c} {n}" for c, n in sorted(whole.by_cause.items())) or "none"
    console.print(
        f"failures: {len(failures.outages)} outages drawn; {whole.interruptions} "
        f"interruptions ({causes}); cluster ETTR {whole.ettr:.3f}"
    )
    lost = ", ".join(f"{c} {h:,.0f}" for c, h in whole.lost_gpu_h.items())
    console.print(f"GPU-hours useful {whole.useful_gpu_h:,.0f}; lost: {lost}")
    return {
        "outages": len(failures.outages),
        "interruptions": whole.interruptions,
        "by_cause": whole.by_cause,
        "ettr": round(whole.ettr, 4),
        "useful_gpu_h": round(whole.useful_gpu_h, 1),
        "lost_gpu_h": {c: round(h, 1) for c, h in whole.lost_gpu_h.items()},
        "jobs": {
            job: {
                "interruptions": ledger.interruptions,
                "ettr": round(ledger.ettr(failures.ended_at), 4),
            }
            for job, ledger in failures.ledgers.items()
        },
    }
