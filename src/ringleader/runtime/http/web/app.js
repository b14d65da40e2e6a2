// ringleader's dashboard: plain DOM and SVG, no library, nothing from the network
// but this server's API. Everything a job or a user wrote is put in as text
// (textContent, attributes), never as markup.
"use strict";

const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
                 "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#8cd17d"];
const SUSPENDED = "#b9bcc6";
const POLL_MS = 2000;
const LOG_KEEP = 200000;  // characters of log kept on the page
const FINISHED = new Set(["succeeded", "failed", "cancelled", "damaged"]);
const SVGNS = "http://www.w3.org/2000/svg";

const $ = (id) => document.getElementById(id);

class SignedOut extends Error {}

/** One colour per user, the same on every page and every load. */
function colour(name) {
  let h = 7;
  for (const ch of name) h = (h * 31 + ch.codePointAt(0)) >>> 0;
  return PALETTE[h % PALETTE.length];
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  for (const c of children) node.append(c instanceof Node ? c : String(c));
  return node;
}

function svg(tag, attrs = {}) {
  const node = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  return node;
}

async function api(path, options = {}) {
  const response = await fetch(path, { credentials: "same-origin", ...options });
  if (response.status === 401) {
    showOnly("signin");
    throw new SignedOut();
  }
  if (!response.ok) {
    let detail = response.statusText;
    try {
      const body = await response.json();
      detail = typeof body.detail === "string" ? body.detail
        : body.detail.map((p) => `${p.field}: ${p.reason}`).join("; ");
    } catch (_) { /* not JSON: keep the status text */ }
    throw new Error(`${response.status}: ${detail}`);
  }
  return response;
}

const json = async (path) => (await api(path)).json();

function showOnly(id) {
  for (const section of ["signin", "home", "job"]) $(section).hidden = section !== id;
}

function say(error) {
  if (error instanceof SignedOut) return;
  $("error").hidden = false;
  $("error").textContent = String(error.message || error);
}

function duration(s) {
  if (s === null || s === undefined || !isFinite(s)) return "–";
  s = Math.max(0, Math.round(s));
  if (s < 90) return `${s} s`;
  if (s < 5400) return `${Math.round(s / 60)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}

const clock = (t) => new Date(t * 1000).toLocaleTimeString();

function progressOf(job) {
  if (!job.epochs) return { fraction: null, text: `step ${job.step}` };
  const fraction = Math.min(1, job.epoch / job.epochs);
  return { fraction, text: `${(100 * fraction).toFixed(0)}% (epoch ${job.epoch.toFixed(2)} of ${job.epochs})` };
}

// ---- charts ----------------------------------------------------------------

/** Axes and a frame: returns x(t) and y(v) for the plot area. */
function frame(chart, x0, x1, y0, y1, xText, yTicks) {
  chart.replaceChildren();
  const box = chart.viewBox.baseVal;
  const m = { l: 42, r: 12, t: 10, b: 26 };
  const w = box.width - m.l - m.r, h = box.height - m.t - m.b;
  const x = (v) => m.l + (x1 > x0 ? (v - x0) / (x1 - x0) : 0) * w;
  const y = (v) => m.t + h - (y1 > y0 ? (v - y0) / (y1 - y0) : 0) * h;
  chart.append(svg("rect", { x: m.l, y: m.t, width: w, height: h, fill: "#fff", stroke: "#d8dce5" }));
  for (const v of yTicks) {
    chart.append(svg("line", { x1: m.l, x2: m.l + w, y1: y(v), y2: y(v), stroke: "#eef0f5" }));
    const label = svg("text", { x: m.l - 6, y: y(v) + 4, "text-anchor": "end" });
    label.textContent = formatTick(v);
    chart.append(label);
  }
  for (const [v, text] of xText) {
    const label = svg("text", { x: x(v), y: m.t + h + 17, "text-anchor": "middle" });
    label.textContent = text;
    chart.append(label);
  }
  return { x, y, m, w, h };
}

function formatTick(v) {
  if (Math.abs(v) >= 1000) return `${(v / 1000).toFixed(1)}k`;
  return Number.isInteger(v) ? String(v) : v.toPrecision(2);
}

function ticks(lo, hi, most = 5) {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / most, mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((k) => k * mag).find((s) => s >= raw);
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + 1e-9; v += step) out.push(+v.toPrecision(6));
  return out;
}

/** GPUs per user over time as a stacked step area, time-sliced-out GPUs on top. */
function drawUsage(chart, legend, usage) {
  const samples = usage.samples;
  const now = usage.now;
  const t0 = samples.length ? Math.min(samples[0].t, now - 10) : now - 10;
  const users = [...new Set(samples.flatMap((s) => Object.keys(s.running)))].sort();
  const yMax = Math.max(usage.gpus, 1);
  const span = now - t0;
  const xTicks = ticks(0, span, 6).map((ago) => [now - ago, ago === 0 ? "now" : `−${duration(ago)}`]);
  const { x, y } = frame(chart, t0, now, 0, yMax, xTicks, ticks(0, yMax, Math.min(yMax, 6)));
  const layers = [...users.map((u) => [u, colour(u), (s) => s.running[u] || 0]),
                  ["time-sliced out", SUSPENDED, (s) => s.suspended]];
  const base = samples.map(() => 0);
  for (const [name, fill, value] of layers) {
    const top = samples.map((s, i) => base[i] + value(s));
    if (top.every((v, i) => v === base[i])) continue;
    const upper = [], lower = [];
    samples.forEach((s, i) => {
      const next = i + 1 < samples.length ? samples[i + 1].t : now;
      upper.push(`${x(s.t)},${y(top[i])}`, `${x(next)},${y(top[i])}`);
      lower.unshift(`${x(next)},${y(base[i])}`, `${x(s.t)},${y(base[i])}`);
    });
    const area = svg("polygon", { points: [...upper, ...lower].join(" "), fill, "data-user": name });
    const title = svg("title");
    title.textContent = name;
    area.append(title);
    chart.append(area);
    top.forEach((v, i) => { base[i] = v; });
  }
  chart.append(svg("line", { x1: x(t0), x2: x(now), y1: y(usage.gpus), y2: y(usage.gpus),
                             stroke: "#1d2330", "stroke-dasharray": "5 4" }));
  legend.replaceChildren(...layers.filter(([n]) => n !== "time-sliced out" || samples.some((s) => s.suspended))
    .map(([name, fill]) => el("li", { "data-user": name }, swatch(fill), name)));
}

function swatch(fill) {
  const node = el("span", { class: "swatch" });
  node.style.background = fill;
  return node;
}

function drawLine(chart, points, xLabel) {
  if (points.length < 2) {
    frame(chart, 0, 1, 0, 1, [], []);
    const note = svg("text", { x: 220, y: 100, "text-anchor": "middle" });
    note.textContent = "not enough progress yet";
    chart.append(note);
    return;
  }
  const xs = points.map((p) => p[0]), ys = points.map((p) => p[1]);
  const x0 = Math.min(...xs), x1 = Math.max(...xs);
  const y0 = Math.min(0, ...ys), y1 = Math.max(...ys) * 1.05 || 1;
  const xt = ticks(0, x1 - x0, 4).map((v) => [x0 + v, xLabel(v, x0 + v)]);
  const { x, y } = frame(chart, x0, x1, y0, y1, xt, ticks(y0, y1, 4));
  chart.append(svg("polyline", { points: points.map(([a, b]) => `${x(a)},${y(b)}`).join(" "),
                                 fill: "none", stroke: "#2f5bea", "stroke-width": 1.6 }));
}

// ---- pages -----------------------------------------------------------------

async function refreshHome() {
  const filter = $("jobs-filter").value;
  const [usage, jobs] = await Promise.all([
    json("/cluster/usage"),
    json(`/jobs?limit=500&order=desc${filter ? `&state=${encodeURIComponent(filter)}` : ""}`),
  ]);
  const last = usage.samples[usage.samples.length - 1];
  const held = last ? Object.values(last.running).reduce((a, b) => a + b, 0) : 0;
  const suspended = last ? last.suspended : 0;
  $("c-total").textContent = usage.gpus;
  $("c-allocated").textContent = held + suspended;
  $("c-idle").textContent = Math.max(usage.gpus - held - suspended, 0);
  $("c-util").textContent = usage.gpus ? `${Math.round((100 * held) / usage.gpus)}%` : "–";
  $("c-queued").textContent = last ? last.queued : "–";
  $("c-window").textContent = usage.samples.length
    ? `(last ${duration(usage.now - usage.samples[0].t)})` : "(no samples yet)";
  drawUsage($("usage-chart"), $("usage-legend"), usage);
  $("jobs-count").textContent = `(${jobs.length})`;
  $("jobs-table").tBodies[0].replaceChildren(...jobs.map(jobRow));
}

// "2 × v100", "3 (v100, k80)": a job's GPUs with their types, where the cluster has types.
function gpusText(job) {
  const types = Array.isArray(job.gpu_types) ? job.gpu_types.filter(Boolean) : [];
  if (!types.length) return String(job.gpus);
  const counts = new Map();
  for (const t of types) counts.set(t, (counts.get(t) || 0) + 1);
  if (counts.size === 1) return `${job.gpus} × ${types[0]}`;
  return `${job.gpus} (${[...counts].map(([t, n]) => `${n} ${t}`).join(", ")})`;
}

function jobRow(job) {
  const p = progressOf(job);
  const bar = el("span", { class: "bar" }, el("span"));
  bar.firstChild.style.width = `${100 * (p.fraction || 0)}%`;
  const link = el("a", { href: `#/job/${encodeURIComponent(job.id)}` }, job.name || job.id);
  return el("tr", { "data-job": job.id },
    el("td", {}, link, el("br"), el("span", { class: "muted" }, job.id)),
    el("td", {}, job.user || "?"),
    el("td", {}, el("span", { class: `state ${job.state}` }, job.state)),
    el("td", {}, gpusText(job)),
    el("td", {}, bar, p.text),
    el("td", {}, duration(job.eta_s)),
    el("td", { class: "why" }, job.reason || ""));
}

const EVENT_WORDS = {
  launched: "launched", stop_requested: "stop asked", stopped: "stopped",
  suspend_requested: "suspended (time slice over)", resume_requested: "resumed",
  succeeded: "succeeded", failed: "failed", cancelled: "cancelled", priority: "priority changed",
};

function eventDetail(e) {
  const { t, kind, ...rest } = e;
  if (kind === "launched") {
    const what = rest.counted && rest.counted !== "start" ? `${rest.counted}: ` : "";
    const types = rest.gpu_types || [];
    const on = (rest.devices || []).map((d, i) => d.join(":") + (types[i] ? ` (${types[i]})` : ""));
    const batch = rest.batch ? `, batch ${rest.batch}` : "";
    return `${what}${rest.workers} GPU(s) on ${on.join(", ")}${batch}`;
  }
  if (kind === "stop_requested") return `for ${rest.reason}${rest.signal ? " (by signal)" : ""}`;
  return Object.entries(rest).map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(" ");
}

async function refreshJob(id) {
  const job = await json(`/jobs/${encodeURIComponent(id)}`);
  $("j-title").textContent = `${job.name || job.id} (${job.user || "?"})`;
  $("j-state").replaceChildren(el("span", { class: `state ${job.state}` }, job.state));
  $("j-gpus").textContent = gpusText(job);
  $("j-progress").textContent = progressOf(job).text;
  $("j-eta").textContent = duration(job.eta_s);
  $("j-resizes").textContent = job.resizes;
  const adapts = job.batch !== null && job.batch !== undefined;
  $("j-batch-card").hidden = !adapts;
  $("j-batches-figure").hidden = !adapts;
  if (adapts) {
    const noise = job.noise_scale === null ? "" : ` (noise scale ${Math.round(job.noise_scale)})`;
    $("j-batch").textContent = `${job.batch}${noise}`;
  }
  $("j-reason").textContent = job.reason ? `Why: ${job.reason}` : "";
  $("j-cancel").hidden = FINISHED.has(job.state);
  $("j-events").tBodies[0].replaceChildren(...job.events.map((e) =>
    el("tr", { "data-kind": e.kind }, el("td", {}, clock(e.t)),
       el("td", {}, EVENT_WORDS[e.kind] || e.kind), el("td", {}, eventDetail(e)))));
  const every = Math.max(1, Math.floor(job.step / 400));
  const records = await json(`/jobs/${encodeURIComponent(id)}/progress?every=${every}`);
  const steps = records.filter((r) => !r.event && r.step_time > 0);
  const speed = steps.filter((r) => r.batch_per_worker && r.world_size && r.t)
    .map((r) => [r.t, (r.batch_per_worker * r.world_size) / r.step_time]);
  drawLine($("j-throughput"), speed, (ago) => `${duration(ago)}`);
  if (adapts) {
    const batches = steps.filter((r) => r.batch_per_worker && r.world_size && r.t)
      .map((r) => [r.t, r.batch_per_worker * r.world_size]);
    drawLine($("j-batches"), batches, (ago) => `${duration(ago)}`);
  }
  drawLine($("j-loss"), steps.filter((r) => r.loss !== null && r.loss !== undefined)
    .map((r) => [r.step, r.loss]), (_, v) => `${Math.round(v)}`);
  return job;
}

// ---- the live log: a stream the server pushes -------------------------------

let following = null;

function followLog(id) {
  const controller = new AbortController();
  following = controller;
  const pre = $("j-log");
  pre.textContent = "";
  const decoder = new TextDecoder();
  const append = (text) => {
    const stick = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    pre.textContent = (pre.textContent + text).slice(-LOG_KEEP);
    if (stick) pre.scrollTop = pre.scrollHeight;
  };
  (async () => {
    let query = "follow=true&tail=200";
    while (!controller.signal.aborted) {
      const response = await api(`/jobs/${encodeURIComponent(id)}/logs?${query}`,
                                 { signal: controller.signal });
      let offset = Number(response.headers.get("X-Log-Offset") || 0);
      const reader = response.body.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        append(decoder.decode(value, { stream: true }));
        offset += value.byteLength;
      }
      const job = await json(`/jobs/${encodeURIComponent(id)}`);
      if (FINISHED.has(job.state)) return;
      query = `follow=true&offset=${offset}`;
    }
  })().catch((e) => { if (e.name !== "AbortError") say(e); });
}

// ---- routing and the poll loop ------------------------------------------------

let busy = false;

function route() {
  return location.hash.startsWith("#/job/")
    ? { page: "job", id: decodeURIComponent(location.hash.slice(6)) } : { page: "home" };
}

async function refresh() {
  if (busy) return;
  busy = true;
  try {
    const where = route();
    if (where.page === "job") await refreshJob(where.id);
    else await refreshHome();
    $("error").hidden = true;
  } catch (e) {
    say(e);
  } finally {
    busy = false;
  }
}

async function open() {
  if (following) following.abort();
  following = null;
  const where = route();
  showOnly(where.page === "job" ? "job" : "home");
  $("j-said").textContent = "";
  if (where.page === "job") followLog(where.id);
  await refresh();
}

async function start() {
  try {
    const me = await json("/whoami");
    $("whoami").textContent = `${me.name}${me.admin ? " (admin)" : ""}`;
    $("logout").hidden = false;
  } catch (e) {
    say(e);
    return;
  }
  $("logout").addEventListener("click", async () => {
    await fetch("/ui/logout", { method: "POST", credentials: "same-origin" });
    showOnly("signin");
  });
  $("jobs-filter").addEventListener("change", refresh);
  $("j-cancel").addEventListener("click", async () => {
    const { id } = route();
    try {
      const job = await (await api(`/jobs/${encodeURIComponent(id)}`, { method: "DELETE" })).json();
      $("j-said").textContent = `cancel requested (was ${job.state})`;
    } catch (e) { say(e); }
  });
  window.addEventListener("hashchange", open);
  await open();
  setInterval(refresh, POLL_MS);
}

document.addEventListener("DOMContentLoaded", start);
