// The dashboard's charts: plain SVG, no library. Axes with regular ticks, a
// stacked area of GPUs per user, lines with marks where a job was relaunched,
// and a readout of the values under the pointer. Loaded before app.js, which
// draws with these; every label is put in as text.
"use strict";

const SVGNS = "http://www.w3.org/2000/svg";
const MARGIN = { l: 42, r: 12, t: 14, b: 26 };

function svg(tag, attrs = {}) {
  const node = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  return node;
}

function svgText(attrs, text) {
  const node = svg("text", attrs);
  node.textContent = text;
  return node;
}

/** Axes and a frame: returns x(v) and y(v) for the plot area, and their inverses. */
function frame(chart, x0, x1, y0, y1, xText, yTicks) {
  chart.replaceChildren();
  const box = chart.viewBox.baseVal;
  const m = MARGIN;
  const w = box.width - m.l - m.r, h = box.height - m.t - m.b;
  const x = (v) => m.l + (x1 > x0 ? (v - x0) / (x1 - x0) : 0) * w;
  const y = (v) => m.t + h - (y1 > y0 ? (v - y0) / (y1 - y0) : 0) * h;
  const xOf = (px) => x0 + ((px - m.l) / w) * (x1 - x0);
  chart.append(svg("rect", { x: m.l, y: m.t, width: w, height: h, fill: "#fff", stroke: "#d8dce5" }));
  for (const v of yTicks) {
    chart.append(svg("line", { x1: m.l, x2: m.l + w, y1: y(v), y2: y(v), stroke: "#eef0f5" }));
    chart.append(svgText({ x: m.l - 6, y: y(v) + 4, "text-anchor": "end", class: "ytick" }, formatTick(v)));
  }
  for (const [v, text] of xText) {
    chart.append(svg("line", { x1: x(v), x2: x(v), y1: m.t + h, y2: m.t + h + 4, stroke: "#b8bdc9" }));
    chart.append(svgText({ x: x(v), y: m.t + h + 17, "text-anchor": "middle", class: "xtick" }, text));
  }
  return { x, y, xOf, m, w, h };
}

function formatTick(v) {
  if (Math.abs(v) >= 1000) return `${(v / 1000).toFixed(1)}k`;
  return Number.isInteger(v) ? String(v) : v.toPrecision(2);
}

function formatValue(v) {
  if (Math.abs(v) >= 100) return String(Math.round(v));
  return v.toPrecision(3);
}

/** Round numbers from lo to hi, about ``most`` of them, a 1-2-5 step apart. */
function ticks(lo, hi, most = 5) {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / most, mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((k) => k * mag).find((s) => s >= raw);
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + 1e-9; v += step) out.push(+v.toPrecision(6));
  return out;
}

const TIME_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800,
                    21600, 43200, 86400];

/** Durations from 0 to ``span`` seconds a whole clock step apart (10 s, 2 min, 1 h...),
 * each labelled in that step's unit, so the labels are as regular as the ticks. */
function timeTicks(span, most = 6) {
  const step = TIME_STEPS.find((s) => s >= span / most) || 86400 * Math.ceil(span / most / 86400);
  const [unit, name] = step >= 3600 ? [3600, "h"] : step >= 60 ? [60, "min"] : [1, "s"];
  const out = [];
  for (let v = 0; v <= span + 1e-9; v += step) out.push([v, `${+(v / unit).toFixed(2)} ${name}`]);
  return out;
}

/** GPUs per user over time as a stacked step area, time-sliced-out GPUs on top. */
function drawUsage(chart, usage, layers) {
  const samples = usage.samples, now = usage.now;
  const t0 = samples.length ? Math.min(samples[0].t, now - 10) : now - 10;
  const yMax = Math.max(usage.gpus, 1);
  const xTicks = timeTicks(now - t0).map(([ago, text]) => [now - ago, ago === 0 ? "now" : `−${text}`]);
  const g = frame(chart, t0, now, 0, yMax, xTicks, ticks(0, yMax, Math.min(yMax, 6)));
  const base = samples.map(() => 0);
  for (const { name, fill, value } of layers) {
    const top = samples.map((s, i) => base[i] + value(s));
    if (top.every((v, i) => v === base[i])) continue;
    const upper = [], lower = [];
    samples.forEach((s, i) => {
      const next = i + 1 < samples.length ? samples[i + 1].t : now;
      upper.push(`${g.x(s.t)},${g.y(top[i])}`, `${g.x(next)},${g.y(top[i])}`);
      lower.unshift(`${g.x(next)},${g.y(base[i])}`, `${g.x(s.t)},${g.y(base[i])}`);
    });
    const area = svg("polygon", { points: [...upper, ...lower].join(" "), fill, "data-user": name });
    const title = svg("title");
    title.textContent = name;
    area.append(title);
    chart.append(area);
    top.forEach((v, i) => { base[i] = v; });
  }
  chart.append(svg("line", { x1: g.x(t0), x2: g.x(now), y1: g.y(usage.gpus), y2: g.y(usage.gpus),
                             stroke: "#1d2330", "stroke-dasharray": "5 4" }));
  readout(chart, g, samples.map((s) => [s.t, 0]), (i) => {
    const s = samples[i];
    const held = layers.map((l) => [l.name, l.value(s)]).filter(([, v]) => v > 0);
    const idle = usage.gpus - held.reduce((a, [, v]) => a + v, 0);
    return [new Date(s.t * 1000).toLocaleTimeString(),
            ...held.map(([n, v]) => `${n}: ${v}`), `idle: ${Math.max(idle, 0)}`];
  });
}

/**
 * A line over ``points`` ([x, y] pairs). ``xTicks(x0, x1)`` gives the x axis'
 * [value, label] pairs, ``describe(point)`` the readout's lines, and ``marks``
 * ([x, label]) dashed verticals where the job was launched again.
 */
function drawLine(chart, points, { xTicks, describe, marks = [] }) {
  if (points.length < 2) {
    frame(chart, 0, 1, 0, 1, [], []);
    chart.append(svgText({ x: 220, y: 100, "text-anchor": "middle" }, "not enough progress yet"));
    return;
  }
  const xs = points.map((p) => p[0]), ys = points.map((p) => p[1]);
  const x0 = Math.min(...xs), x1 = Math.max(...xs);
  const y0 = Math.min(0, ...ys), y1 = Math.max(...ys) * 1.05 || 1;
  const g = frame(chart, x0, x1, y0, y1, xTicks(x0, x1), ticks(y0, y1, 4));
  for (const [at, label] of marks.filter(([at]) => at >= x0 && at <= x1)) {
    const mark = svg("g", { class: "mark" });
    mark.append(svg("line", { x1: g.x(at), x2: g.x(at), y1: g.m.t, y2: g.m.t + g.h,
                              stroke: "#e15759", "stroke-dasharray": "3 3" }));
    mark.append(svgText({ x: g.x(at) + 3, y: g.m.t + 9, class: "mark-label" }, label));
    chart.append(mark);
  }
  chart.append(svg("polyline", { points: points.map(([a, b]) => `${g.x(a)},${g.y(b)}`).join(" "),
                                 fill: "none", stroke: "#2f5bea", "stroke-width": 1.6 }));
  readout(chart, g, points, (i) => describe(points[i]));
}

/** Elapsed time since the first point, in regular clock steps. */
const elapsedTicks = (x0, x1) => timeTicks(x1 - x0, 4).map(([v, text]) => [x0 + v, text]);

/**
 * The values under the pointer: a guide at the nearest point and a box of the
 * lines ``lines(i)`` gives for it. Kept across redraws (the page polls), so a
 * reader's pointer keeps its readout while the chart moves on.
 */
function readout(chart, g, points, lines) {
  const overlay = svg("rect", { x: g.m.l, y: g.m.t, width: g.w, height: g.h, fill: "transparent",
                                class: "hover-area" });
  chart.append(overlay);
  const show = (px) => {
    chart.querySelectorAll(".readout").forEach((n) => n.remove());
    if (px === null || !points.length) return;
    const want = g.xOf(px);
    let best = 0;
    points.forEach(([a], i) => { if (Math.abs(a - want) < Math.abs(points[best][0] - want)) best = i; });
    const at = g.x(points[best][0]);
    const group = svg("g", { class: "readout", "pointer-events": "none" });
    group.append(svg("line", { x1: at, x2: at, y1: g.m.t, y2: g.m.t + g.h, stroke: "#6b7385" }));
    const text = lines(best);
    const width = 8 + 6.2 * Math.max(...text.map((t) => t.length));
    const left = at + width + 8 > g.m.l + g.w ? at - width - 6 : at + 6;
    group.append(svg("rect", { x: left, y: g.m.t + 4, width, height: 6 + 14 * text.length,
                               fill: "#fff", stroke: "#b8bdc9", rx: 3 }));
    text.forEach((t, k) => group.append(svgText({ x: left + 4, y: g.m.t + 18 + 14 * k }, t)));
    chart.append(group);
  };
  const toPx = (event) => {
    const p = new DOMPoint(event.clientX, event.clientY).matrixTransform(chart.getScreenCTM().inverse());
    return p.x;
  };
  overlay.addEventListener("mousemove", (e) => { chart.dataset.hoverX = toPx(e); show(toPx(e)); });
  overlay.addEventListener("mouseleave", () => { delete chart.dataset.hoverX; show(null); });
  if (chart.dataset.hoverX !== undefined) show(Number(chart.dataset.hoverX));
}
