"""``GET /metrics``: what the scheduler is doing, in Prometheus' text format.

Two kinds of figure. Those that happen (a decision, a job's first launch,
a counted resize or suspend) are recorded by the controller as they happen,
into histograms and counters. Those that are (jobs per state and user, GPUs
held, a running job's speed) are read from the store when Prometheus
scrapes, so they are never stale and cost nothing between scrapes.

Every name starts ``ringleader_``; ``examples/grafana-dashboard.json`` plots
them all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from ringleader.runtime.state.rows import JobRow
    from ringleader.runtime.state.store import Store

QUEUE_WAIT_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 12 * 3600, 86400)
DECISION_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class Telemetry:
    """The controller's running record, and the registry ``/metrics`` serves."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.queue_wait = Histogram(
            "ringleader_queue_wait_seconds",
            "From submission to a job's first launch.",
            buckets=QUEUE_WAIT_BUCKETS,
            registry=self.registry,
        )
        self.decision = Histogram(
            "ringleader_decision_seconds",
            "How long the policy took to decide (quotas and all).",
            buckets=DECISION_BUCKETS,
            registry=self.registry,
        )
        self.events = Counter(
            "ringleader_events",
            "Counted events: start, resize, migration, restart, suspend, resume.",
            ["kind"],
            registry=self.registry,
        )

    def watch(self, store: Store, capacity: Callable[[], int]) -> None:
        """Serve the store's current state with the counters (once, at start)."""
        self.registry.register(_State(store, capacity))

    def text(self) -> bytes:
        return generate_latest(self.registry)


class _State(Collector):
    """Gauges read at scrape time: jobs by state and user, GPUs, each running job's speed."""

    def __init__(self, store: Store, capacity: Callable[[], int]) -> None:
        self.store = store
        self.capacity = capacity

    def collect(self) -> Iterator[Metric]:
        jobs = GaugeMetricFamily(
            "ringleader_jobs", "Jobs by state and user.", labels=["state", "user"]
        )
        for (state, user), n in sorted(self.store.counts().items()):
            jobs.add_metric([state, user], n)
        yield jobs
        running = [r for r in self.store.unfinished() if r.state.value == "running"]
        total = self.capacity()
        held = len({tuple(d) for r in running for d in r.devices})
        gpus = GaugeMetricFamily("ringleader_gpus", "GPUs by use.", labels=["use"])
        gpus.add_metric(["total"], total)
        gpus.add_metric(["allocated"], held)
        gpus.add_metric(["idle"], max(total - held, 0))
        yield gpus
        speed = GaugeMetricFamily(
            "ringleader_job_steps_per_second",
            "Minibatches a second of each running job at its current size (as measured).",
            labels=["job", "user", "workers"],
        )
        for row in running:
            if (rate := steps_per_second(row)) is not None:
                speed.add_metric([row.id, row.spec.user, str(row.workers)], rate)
        yield speed


def steps_per_second(row: JobRow) -> float | None:
    """The job's measured speed at its current size, if it has one yet."""
    seen = row.observations.get(str(row.workers))
    if not seen or seen[0] <= 0:
        return None
    return 1.0 / float(seen[0])
