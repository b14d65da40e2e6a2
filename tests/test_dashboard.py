"""The web dashboard in a real headless Chromium (Debian's package, driven by Playwright).

One server with two users' jobs running; a browser signs in as alice with a
one-time link, as ``ringleader dashboard`` prints, and is checked for what a
person would see: the cluster picture (its pixels, in a screenshot), her
jobs and not bob's, a job's history, charts and live log, and a log line
of markup shown as text. ``RINGLEADER_SCREENSHOTS=DIR`` keeps the pictures.
"""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.live_server import LiveServer, run_cli, tiny_job, wait_for

pytestmark = pytest.mark.slow

playwright = pytest.importorskip("playwright.sync_api", reason="pip install playwright")

MARKUP = "<b id=pwned>bold?</b>"
CHATTY = (
    "python -u -c \"import time\nfor i in range(3000): print(f'{i} "
    + MARKUP
    + "', flush=True); time.sleep(0.1)\""
)


def chromium() -> str:
    found = os.environ.get("RINGLEADER_CHROMIUM") or shutil.which("chromium")
    if not found:
        pytest.fail(
            "the dashboard test needs Debian's chromium: `apt-get install chromium` "
            "(make test installs it), or set RINGLEADER_CHROMIUM to a Chromium binary"
        )
    return found


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    server = LiveServer(tmp_path_factory.mktemp("dash") / "state", 5, 2.0).start()
    try:
        alice, bob = server.user("alice"), server.user("bob")
        jobs = {
            "train": _submit(
                alice, tiny_job("alice-train", epochs=200, elastic=True, min_gpus=1, max_gpus=2)
            ),
            "chatty": _submit(alice, {"name": "alice-chatty", "command": CHATTY, "gpus": 1}),
            "bob": _submit(bob, tiny_job("bob-train", epochs=200, gpus=1)),
            "adaptive": _submit(alice, ADAPTIVE),
        }
        for job_id in jobs.values():
            server.wait_state(job_id, {"running"}, timeout=60)
        with playwright.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
            yield {"server": server, "alice": alice, "bob": bob, "jobs": jobs, "browser": browser}
            browser.close()
    finally:
        server.stop()
        server.kill_workers()


ADAPTIVE = {
    "name": "alice-adaptive",
    "command": "python -m ringleader.workloads.goodput --epochs 1000 --examples 1024 --step-ms 5",
    "batch": {"global_min": 32, "global_max": 256, "per_gpu_max": 128},
}
"""A job whose batch follows its GPUs: its page shows the batch and its noise scale."""


def _submit(client: httpx.Client, spec: dict[str, Any]) -> str:
    r = client.post("/jobs", json=spec)
    assert r.status_code == 201, r.text
    job_id: str = r.json()["id"]
    return job_id


def _signed_in(world: dict[str, Any]) -> Any:
    """A fresh browser context signed in as alice through a one-time link."""
    server: LiveServer = world["server"]
    link = world["alice"].post("/dashboard/ticket").json()["url"]
    context = world["browser"].new_context(viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    page.goto(server.url + link)
    return context, page, server.url + link


def _keep(page: Any, name: str) -> None:
    where = os.environ.get("RINGLEADER_SCREENSHOTS")
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(where) / name), full_page=True)


def test_sign_in_sets_a_strict_http_only_cookie_once(world: dict[str, Any]) -> None:
    context, page, link = _signed_in(world)
    assert page.url.endswith("/ui/")
    page.wait_for_selector("#whoami:has-text('alice')")
    (cookie,) = context.cookies()
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert page.evaluate("document.cookie") == ""  # no page script can read it
    # The link works once: a second browser gets the sign-in failure, not a session.
    other = world["browser"].new_context()
    reply = other.new_page().goto(link)
    assert reply is not None and reply.status == 401
    assert other.cookies() == []
    other.close()
    # Signing out ends the session on the server, not only in this browser.
    session = cookie["value"]
    page.click("#logout")
    page.wait_for_selector("#signin", state="visible")
    stale = httpx.get(
        world["server"].url + "/whoami", cookies={cookie["name"]: session}, timeout=10
    )
    assert stale.status_code == 401
    context.close()


def test_cluster_view_shows_who_holds_gpus_and_only_her_jobs(world: dict[str, Any]) -> None:
    context, page, _ = _signed_in(world)
    jobs = world["jobs"]
    rows = "#jobs-table tbody tr"
    page.wait_for_selector(f"{rows}[data-job='{jobs['train']}']")
    page.wait_for_selector(f"{rows}[data-job='{jobs['chatty']}']")
    assert page.locator(f"{rows}[data-job='{jobs['bob']}']").count() == 0
    # Who holds what: totals for every user, as reasons name holders too.
    page.wait_for_selector("#usage-chart polygon[data-user='alice']")
    page.wait_for_selector("#usage-chart polygon[data-user='bob']")
    assert page.inner_text("#c-total") == "5"
    held = int(page.inner_text("#c-allocated"))
    assert 4 <= held <= 5, held
    row = page.locator(f"{rows}[data-job='{jobs['train']}']")
    assert "running" in row.inner_text() and "alice-train" in row.inner_text()
    # Once its speed is measured, the training job says when it should end.
    eta = row.locator("td").nth(5)
    wait_for(lambda: eta.inner_text() not in ("", "–"), 60, "an ETA for alice-train")
    # The picture itself: alice's colour fills a real share of the chart.
    fill = page.get_attribute("#usage-chart polygon[data-user='alice']", "fill")
    assert fill is not None
    picture = page.locator("#usage-chart").screenshot()
    assert _pixels_of(picture, fill) > 0.05, "alice's area is not visible in the chart"
    _keep(page, "dashboard.png")
    context.close()


def test_device_map_shows_which_job_holds_each_gpu_and_hides_others_jobs(
    world: dict[str, Any],
) -> None:
    context, page, _ = _signed_in(world)
    jobs = world["jobs"]
    page.wait_for_selector(f"#device-map .gpu[data-job='{jobs['train']}']")
    page.wait_for_selector("#device-map .gpu[data-user='bob']")
    assert page.locator("#device-map .node").count() == 1
    assert page.locator("#device-map .gpu").count() == 5  # every GPU, held or idle
    # Bob's GPU says whose it is, not which job: his job's id and name are his.
    bob_cell = page.locator("#device-map .gpu[data-user='bob']").first
    assert bob_cell.get_attribute("data-job") is None
    assert "bob-train" not in bob_cell.inner_text() and "bob" in bob_cell.inner_text()
    # Hers name the job and the device, and the cell is in her colour.
    mine = page.locator(f"#device-map .gpu[data-job='{jobs['train']}']").first
    assert "alice-train" in mine.inner_text()
    title = mine.get_attribute("title") or ""
    assert title.startswith("local:") and "alice-train (alice, running)" in title
    # The same rule in the API; an admin sees every job on every device.
    held = [
        h
        for n in world["alice"].get("/cluster/devices").json()["nodes"]
        for g in n["gpus"]
        for h in g
    ]
    assert {h["job"] for h in held if h["user"] == "bob"} == {None}
    admin = httpx.get(world["server"].url + "/cluster/devices", headers=world["server"].headers)
    seen = {h["job"] for n in admin.json()["nodes"] for g in n["gpus"] for h in g}
    assert jobs["bob"] in seen and jobs["train"] in seen
    _keep(page, "dashboard-devices.png")
    context.close()


def test_usage_chart_has_regular_time_ticks_and_values_on_hover(world: dict[str, Any]) -> None:
    context, page, _ = _signed_in(world)
    page.wait_for_selector("#usage-chart polygon[data-user='alice']")
    ticks = page.eval_on_selector_all(
        "#usage-chart text.xtick", "ts => ts.map(t => [t.textContent, t.getAttribute('x')])"
    )
    labels, xs = [t for t, _ in ticks], [float(x) for _, x in ticks]
    assert labels[0] == "now" and len(labels) >= 3, labels
    units = {label.split()[-1] for label in labels[1:]}
    values = [float(label.split()[0].lstrip("−")) for label in labels[1:]]
    assert len(units) == 1, labels  # one unit along the axis, not "2 min" beside "90 s"
    steps = {round(b - a, 6) for a, b in zip([0.0, *values], values, strict=False)}
    assert len(steps) == 1, labels  # a whole step apart
    gaps = [round(a - b, 1) for a, b in itertools.pairwise(xs)]
    assert max(gaps) - min(gaps) <= 0.2, gaps
    # The values under the pointer: the time and each user's GPUs then.
    page.hover("#usage-chart .hover-area", position={"x": 700, "y": 100})
    readout = page.locator("#usage-chart .readout")
    readout.wait_for()
    said = readout.text_content() or ""
    assert "alice: " in said and "idle: " in said, said
    context.close()


def test_job_page_history_charts_and_live_log(world: dict[str, Any]) -> None:
    context, page, _ = _signed_in(world)
    jobs = world["jobs"]
    page.goto(world["server"].url + f"/ui/#/job/{jobs['train']}")
    page.wait_for_selector("#j-events tr[data-kind='launched']")
    assert "alice-train" in page.inner_text("#j-title")
    # Why it has its GPUs: the policy's own account, in words and in numbers.
    page.wait_for_selector("#j-reason:has-text('runs on')")
    shown = world["alice"].get(f"/jobs/{jobs['train']}").json()
    assert shown["reason_code"] == "sized_by_gain" and shown["sizing"]["workers"] == shown["gpus"]
    # Throughput from the job's own progress records, its values under the pointer.
    wait_for(lambda: page.locator("#j-throughput polyline").count() == 1, 60, "a throughput line")
    page.hover("#j-throughput .hover-area", position={"x": 200, "y": 80})
    page.wait_for_selector("#j-throughput .readout:has-text('examples/s')")
    # The history in words: no raw key=value of the store's detail.
    history = page.inner_text("#j-events")
    assert "GPU(s) on local:" in history and "generation=" not in history, history
    _keep(page, "dashboard-job.png")
    # Each rank's log, and the chosen one to download whole.
    assert page.locator("#j-rank option").count() == 2  # elastic up to 2 workers
    with page.expect_download() as fetched:
        page.click("#j-download")
    saved = Path(fetched.value.path()).read_text()
    assert fetched.value.suggested_filename == f"{jobs['train']}-rank0.log"
    now = world["alice"].get(f"/jobs/{jobs['train']}/logs", params={"rank": 0}).text
    assert now.startswith(saved), "the download is not the rank's log"
    page.select_option("#j-rank", "1")
    href = page.get_attribute("#j-download", "href") or ""
    assert href.endswith("rank=1&download=true"), href
    # The live log is pushed by the server, and markup in it stays text.
    page.goto(world["server"].url + f"/ui/#/job/{jobs['chatty']}")
    page.wait_for_selector("#j-log:has-text('bold?')")
    first = page.inner_text("#j-log")
    assert MARKUP in first and page.locator("#pwned").count() == 0
    wait_for(lambda: len(page.inner_text("#j-log")) > len(first), 20, "new log lines to arrive")
    # Cancel from the page: a real DELETE, carrying the page's Origin.
    page.click("#j-cancel")
    page.wait_for_selector("#j-said:has-text('cancel requested')")
    world["server"].wait_state(jobs["chatty"], {"cancelled"}, timeout=60)
    # A job whose batch adapts: its batch, its noise scale, and the batch over time.
    page.goto(world["server"].url + f"/ui/#/job/{jobs['adaptive']}")
    page.wait_for_selector("#j-batch:has-text('noise scale')", timeout=60_000)
    assert page.inner_text("#j-batch").startswith("32 (noise scale ")
    wait_for(lambda: page.locator("#j-batches polyline").count() == 1, 60, "a batch line")
    assert "batch 32" in page.inner_text("#j-events")  # what the launch took
    # Bob's job is not hers: the page says so, as the API does.
    page.goto(world["server"].url + f"/ui/#/job/{jobs['bob']}")
    page.wait_for_selector("#error:has-text('404')")
    context.close()


def test_a_relaunch_is_marked_on_the_throughput_chart(world: dict[str, Any]) -> None:
    """The page's own drawing code, in the browser, given a history with a resize."""
    context, page, _ = _signed_in(world)
    page.wait_for_selector("#whoami:has-text('alice')")
    labels = page.evaluate(
        """() => {
        const chart = svg("svg", { viewBox: "0 0 440 200" });
        document.body.append(chart);
        const events = [{ t: 100, kind: "launched", counted: "start", workers: 1 },
                        { t: 160, kind: "launched", counted: "resize", workers: 2 }];
        const points = [[100, 50], [130, 52], [170, 96], [200, 98]];
        drawLine(chart, points, { xTicks: elapsedTicks, marks: relaunches(events),
                                  describe: ([t, v]) => [String(v)] });
        return [...chart.querySelectorAll(".mark text")].map((t) => t.textContent);
    }"""
    )
    assert labels == ["resize → 2"], labels
    context.close()


def test_cookie_alone_cannot_change_anything_without_the_page_origin(
    world: dict[str, Any],
) -> None:
    context, page, _ = _signed_in(world)
    page.wait_for_selector("#whoami:has-text('alice')")
    (cookie,) = context.cookies()
    url = world["server"].url
    jar = {cookie["name"]: cookie["value"]}
    job = world["jobs"]["train"]
    # No Origin (not a browser page): refused; a foreign Origin: refused before routing.
    assert httpx.delete(f"{url}/jobs/{job}", cookies=jar, timeout=10).status_code == 403
    foreign = {"Origin": "https://evil.example"}
    r = httpx.delete(f"{url}/jobs/{job}", cookies=jar, headers=foreign, timeout=10)
    assert r.status_code == 403
    assert world["server"].job(job)["state"] == "running"
    context.close()


def test_dashboard_command_prints_a_working_link(world: dict[str, Any]) -> None:
    server: LiveServer = world["server"]
    out = run_cli(server.url, "dashboard")
    assert out.returncode == 0, out.stderr
    link = out.stdout.strip()
    assert link.startswith(f"{server.url}/ui/login?ticket="), link
    context = world["browser"].new_context()
    page = context.new_page()
    page.goto(link)
    page.wait_for_selector("#whoami:has-text('admin')")
    # An admin sees every user's jobs.
    page.wait_for_selector(f"#jobs-table tbody tr[data-job='{world['jobs']['bob']}']")
    context.close()


def _pixels_of(png: bytes, colour: str) -> float:
    """The share of the picture's pixels within a small distance of ``colour`` (#rrggbb)."""
    from io import BytesIO

    from PIL import Image

    want = tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))
    image = Image.open(BytesIO(png)).convert("RGB")
    pixels = [image.getpixel((x, y)) for x in range(image.width) for y in range(image.height)]
    near = sum(1 for p in pixels if sum(abs(a - b) for a, b in zip(p, want, strict=True)) < 24)
    return near / len(pixels)
