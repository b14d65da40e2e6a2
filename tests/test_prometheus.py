"""``GET /metrics``: Prometheus' text format, read back with prometheus-client's own parser."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.live_server import LiveServer, run_cli, tiny_job, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = LiveServer(tmp_path_factory.mktemp("prometheus"), 2, 1.0).start()
    yield live
    live.stop()
    live.kill_workers()


def _samples(server: LiveServer) -> dict[str, list[tuple[dict[str, str], float]]]:
    r = server.http.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(r.text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return out


def _value(samples: list[tuple[dict[str, str], float]], **labels: str) -> float:
    found = [v for got, v in samples if all(got.get(k) == x for k, x in labels.items())]
    assert found, f"no sample with {labels} in {samples}"
    return sum(found)


def test_metrics_say_what_the_scheduler_is_doing(server: LiveServer) -> None:
    job = server.submit(tiny_job("metered", epochs=30))
    server.wait_state(job, {"running"}, 60)
    wait_for(lambda: server.job(job)["step"] > 20, 120, "the job to report its speed")

    def sped_up() -> bool:
        return bool(_samples(server).get("ringleader_job_steps_per_second"))

    wait_for(sped_up, 60, "a steps/s sample")
    seen = _samples(server)
    assert _value(seen["ringleader_jobs"], state="running", user="admin") == 1
    assert _value(seen["ringleader_gpus"], use="total") == 2
    allocated = _value(seen["ringleader_gpus"], use="allocated")
    assert allocated >= 1 and _value(seen["ringleader_gpus"], use="idle") == 2 - allocated
    assert _value(seen["ringleader_queue_wait_seconds_count"]) >= 1
    assert _value(seen["ringleader_decision_seconds_count"]) >= 1
    assert _value(seen["ringleader_events_total"], kind="start") >= 1
    rate = _value(seen["ringleader_job_steps_per_second"], job=job, user="admin")
    assert 0 < rate < 10_000
    server.cancel(job)
    server.wait_state(job, {"cancelled"}, 60)
    after = _samples(server)
    assert _value(after["ringleader_jobs"], state="cancelled", user="admin") >= 1
    assert not [s for s in after.get("ringleader_job_steps_per_second", []) if s[0]["job"] == job]


def test_metrics_are_for_admins(server: LiveServer) -> None:
    assert httpx.get(server.url + "/metrics", timeout=10).status_code == 401
    token = run_cli(server.url, "users", "add", "viewer").stdout.strip()
    mine = {"Authorization": f"Bearer {token}"}
    assert httpx.get(server.url + "/metrics", headers=mine, timeout=10).status_code == 403


def test_the_grafana_dashboard_plots_only_series_the_server_serves(server: LiveServer) -> None:
    dashboard = Path(__file__).parents[1] / "examples" / "grafana-dashboard.json"
    exprs = [t["expr"] for p in json.loads(dashboard.read_text())["panels"] for t in p["targets"]]
    wanted = {name for e in exprs for name in re.findall(r"ringleader_[a-z_]+", e)}
    # Families are announced even before they have samples (no job yet, no event).
    text = server.http.get("/metrics").text
    families = [f.name for f in text_string_to_metric_families(text)]
    suffixes = ("", "_total", "_bucket", "_count", "_sum")
    served = {name + suffix for name in families for suffix in suffixes}
    assert wanted and wanted <= served, wanted - served
