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

function swatch(fill) {
  const node = el("span", { class: "swatch" });
  node.style.background = fill;
  return node;
}

/** The usage chart's layers: each user's running GPUs, then the time-sliced-out ones. */
function usageLayers(samples) {
  const users = [...new Set(samples.flatMap((s) => Object.keys(s.running)))].sort();
  return [...users.map((u) => ({ name: u, fill: colour(u), value: (s) => s.running[u] || 0 })),
          { name: "time-sliced out", fill: SUSPENDED, value: (s) => s.suspended }];
}

// ---- pages -----------------------------------------------------------------

async function refreshHome() {
  const filter = $("jobs-filter").value;
  const [usage, devices, jobs] = await Promise.all([
    json("/cluster/usage"),
    json("/cluster/devices"),
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
  const layers = usageLayers(usage.samples);
  drawUsage($("usage-chart"), usage, layers);
  const shown = layers.filter((l) => l.name !== "time-sliced out" || usage.samples.some((s) => s.suspended));
  $("usage-legend").replaceChildren(...shown.map((l) => el("li", { "data-user": l.name }, swatch(l.fill), l.name)));
  drawDevices($("device-map"), devices);
  $("jobs-count").textContent = `(${jobs.length})`;
  $("jobs-table").tBodies[0].replaceChildren(...jobs.map(jobRow));
}

/** Each node a row, each GPU a cell in its holder's colour: which job holds which device. */
function drawDevices(map, devices) {
  map.replaceChildren(...devices.nodes.map((node) => {
    const cells = node.gpus.map((holders, index) => {
      const where = `${node.name}:${index}`;
      const cell = el("span", { class: "gpu", "data-device": where });
      if (!holders.length) {
        cell.classList.add("idle");
        cell.append("idle");
        cell.title = `${where}: idle`;
        return cell;
      }
      const words = holders.map((h) => `${h.name || h.job || `a job of ${h.user}`} (${h.user}, ${h.state})`);
      cell.title = `${where}: ${words.join("; ")}`;
      const first = holders[0];
      cell.dataset.user = first.user;
      if (first.job) cell.dataset.job = first.job;
      cell.style.background = first.state === "suspended" ? SUSPENDED : colour(first.user);
      if (holders.length > 1) cell.classList.add("packed");
      cell.append(el("span", { class: "gpu-label" }, first.name || first.user),
                  holders.length > 1 ? el("span", { class: "gpu-more" }, `+${holders.length - 1}`) : "");
      return cell;
    });
    const label = node.gpu_type ? `${node.name} (${node.gpu_type})` : node.name;
    return el("div", { class: "node", "data-node": node.name },
      el("span", { class: "node-name" }, label), el("span", { class: "gpus" }, ...cells));
  }));
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

/** Where the job was launched again (resized, migrated, restarted): [t, label] marks. */
function relaunches(events) {
  return events.filter((e) => e.kind === "launched" && e.counted && e.counted !== "start")
    .map((e) => [e.t, `${e.counted} → ${e.workers}`]);
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
       el("td", {}, e.what || e.kind), el("td", {}, e.text || ""))));
  rankChoices(id, job.log_ranks || 1);
  const every = Math.max(1, Math.floor(job.step / 400));
  const records = await json(`/jobs/${encodeURIComponent(id)}/progress?every=${every}`);
  const steps = records.filter((r) => !r.event && r.step_time > 0);
  const speed = steps.filter((r) => r.batch_per_worker && r.world_size && r.t)
    .map((r) => [r.t, (r.batch_per_worker * r.world_size) / r.step_time]);
  const marks = relaunches(job.events);
  drawLine($("j-throughput"), speed, { xTicks: elapsedTicks, marks,
    describe: ([t, v]) => [clock(t), `${formatValue(v)} examples/s`] });
  if (adapts) {
    const batches = steps.filter((r) => r.batch_per_worker && r.world_size && r.t)
      .map((r) => [r.t, r.batch_per_worker * r.world_size]);
    drawLine($("j-batches"), batches, { xTicks: elapsedTicks, marks,
      describe: ([t, v]) => [clock(t), `batch ${Math.round(v)}`] });
  }
  drawLine($("j-loss"), steps.filter((r) => r.loss !== null && r.loss !== undefined)
    .map((r) => [r.step, r.loss]), {
    xTicks: (x0, x1) => ticks(x0, x1, 4).map((v) => [v, formatTick(v)]),
    describe: ([step, loss]) => [`step ${step}`, `loss ${formatValue(loss)}`] });
  return job;
}

// ---- the live log: a stream the server pushes -------------------------------

let following = null;

/** The rank selector's options (0 to ``ranks`` - 1) and the chosen rank's download link. */
function rankChoices(id, ranks) {
  const select = $("j-rank");
  if (select.options.length !== ranks) {
    const chosen = Math.min(Number(select.value || 0), ranks - 1);
    select.replaceChildren(...Array.from({ length: ranks }, (_, r) => el("option", { value: r }, `rank ${r}`)));
    select.value = String(chosen);
  }
  $("j-download").href = `/jobs/${encodeURIComponent(id)}/logs?rank=${select.value || 0}&download=true`;
}

function followLog(id, rank = 0) {
  if (following) following.abort();
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
    let query = `rank=${rank}&follow=true&tail=200`;
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
      query = `rank=${rank}&follow=true&offset=${offset}`;
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
  if (where.page === "job") {
    $("j-rank").replaceChildren(el("option", { value: 0 }, "rank 0"));
    followLog(where.id);
  }
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
  $("j-rank").addEventListener("change", () => {
    const { id } = route();
    followLog(id, Number($("j-rank").value));
    rankChoices(id, $("j-rank").options.length);
  });
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
