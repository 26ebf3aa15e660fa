// Drawing functions for the posenc explorer: SVG line charts, canvas heatmaps, clock dials.
// They only draw numbers handed to them by the server; nothing here computes an encoding.

import { MARK_COLOURS } from "./palette.js";

const SVG_NS = "http://www.w3.org/2000/svg";

export function svg(tag, attrs = {}, parent = null) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value !== undefined && value !== null) node.setAttribute(key, value);
  }
  if (parent) parent.appendChild(node);
  return node;
}

export function html(tag, attrs = {}, parent = null, text = null) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "dataset") Object.assign(node.dataset, value);
    else if (value !== undefined && value !== null) node.setAttribute(key, value);
  }
  if (text !== null) node.textContent = text;
  if (parent) parent.appendChild(node);
  return node;
}

// Numbers for people: fixed decimals for ordinary sizes, exponent form for tiny or huge ones.
export function fmt(value, digits = 4) {
  if (value === null || value === undefined || Number.isNaN(value)) return "n/a";
  if (!Number.isFinite(value)) return value > 0 ? "∞" : "−∞";
  const size = Math.abs(value);
  if (size !== 0 && (size < 1e-3 || size >= 1e6)) return value.toExponential(Math.max(1, digits - 2));
  const text = value.toFixed(digits);
  return text.startsWith("-") ? "−" + text.slice(1) : text;
}

export function fmtInt(value) {
  return Math.round(value).toLocaleString("en-US");
}

// -- scales ---------------------------------------------------------------------------------------
export function scale(domain, range, log = false) {
  const [d0, d1] = domain;
  const [r0, r1] = range;
  if (log) {
    const l0 = Math.log10(d0), l1 = Math.log10(d1);
    const f = (v) => r0 + ((Math.log10(v) - l0) / (l1 - l0 || 1)) * (r1 - r0);
    f.invert = (p) => 10 ** (l0 + ((p - r0) / (r1 - r0)) * (l1 - l0));
    return f;
  }
  const f = (v) => r0 + ((v - d0) / (d1 - d0 || 1)) * (r1 - r0);
  f.invert = (p) => d0 + ((p - r0) / (r1 - r0)) * (d1 - d0);
  return f;
}

function niceStep(span, count) {
  const raw = span / Math.max(1, count);
  const power = 10 ** Math.floor(Math.log10(raw));
  const unit = raw / power;
  return (unit < 1.5 ? 1 : unit < 3.5 ? 2 : unit < 7.5 ? 5 : 10) * power;
}

export function ticks(domain, log, count = 6) {
  const [lo, hi] = domain;
  if (log) {
    const out = [];
    const first = Math.ceil(Math.log10(lo)), last = Math.floor(Math.log10(hi));
    const every = Math.max(1, Math.ceil((last - first + 1) / 8));
    for (let e = first; e <= last; e += every) out.push(10 ** e);
    return out;
  }
  const step = niceStep(hi - lo, count);
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(Math.abs(v) < step * 1e-9 ? 0 : v);
  return out;
}

function tickLabel(v, log) {
  if (log) {
    const e = Math.round(Math.log10(v));
    return e >= -2 && e <= 5 ? String(Number(v.toPrecision(3))) : `1e${e}`;
  }
  if (Math.abs(v) >= 1e5) return v.toExponential(0);
  return String(Number(v.toPrecision(4)));
}

export function extent(arrays, { positiveOnly = false } = {}) {
  let lo = Infinity, hi = -Infinity;
  for (const arr of arrays) {
    for (const v of arr) {
      if (v === null || !Number.isFinite(v) || (positiveOnly && v <= 0)) continue;
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
  }
  if (lo === Infinity) return positiveOnly ? [1, 10] : [0, 1];
  if (lo === hi) return positiveOnly ? [lo / 2, hi * 2] : [lo - 1, hi + 1];
  return [lo, hi];
}

// A label on a white box, so lines and curves behind it never strike it through. The width is
// estimated from the text (11px type) because a chart may be drawn while its view is hidden.
export function boxedLabel(parent, { x, y, text, color = "#555", anchor = "start", cls = "marker-label" }) {
  const w = text.length * 6.2 + 6, h = 14;
  const left = anchor === "end" ? x - w + 3 : anchor === "middle" ? x - w / 2 : x - 3;
  const group = svg("g", { class: "boxed-label" }, parent);
  svg("rect", { x: left, y: y - 11, width: w, height: h, rx: 3, fill: "#fff", "fill-opacity": 0.9 }, group);
  svg("text", { x, y, "text-anchor": anchor, class: cls, fill: color }, group).textContent = text;
  return group;
}

// -- line chart -------------------------------------------------------------------------------------
// spec: {width, height, x: {domain, log, label}, y: {domain, log, label}, series: [{name, xs, ys, color,
// dash, width, points}], hlines: [{y, label, color, dash}], vlines: [{x, label, color}],
// bands: [{x0, x1, color, label}], labelsOutside (hline labels in a right margin of that width),
// onHover(xValue) -> optional}
export function lineChart(container, spec) {
  container.replaceChildren();
  const width = spec.width || 640, height = spec.height || 320;
  const outside = (spec.hlines || []).some((l) => l.label) ? spec.labelsOutside || 0 : 0;
  const m = { left: 62, right: 16 + outside, top: 14, bottom: 44 };
  const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, class: `chart${spec.wide ? " wide" : ""}`, role: "img",
    "aria-label": spec.title || "chart" }, container);
  const x = scale(spec.x.domain, [m.left, width - m.right], spec.x.log);
  const y = scale(spec.y.domain, [height - m.bottom, m.top], spec.y.log);
  const clipId = `clip${Math.random().toString(36).slice(2)}`;
  const defs = svg("defs", {}, root);
  const clip = svg("clipPath", { id: clipId }, defs);
  svg("rect", { x: m.left, y: m.top, width: width - m.left - m.right, height: height - m.top - m.bottom }, clip);

  // Ramps: light fill and a dashed outline each, so two overlapping ramps both stay visible.
  (spec.bands || []).forEach((band, k) => {
    const xa = x(band.x0), xb = x(band.x1);
    svg("rect", { x: Math.min(xa, xb), y: m.top, width: Math.max(2, Math.abs(xb - xa)),
      height: height - m.top - m.bottom, fill: band.color, "fill-opacity": 0.1, stroke: band.color,
      "stroke-width": 1.5, "stroke-dasharray": k % 2 ? "2 3" : "6 3", class: "band",
      "clip-path": `url(#${clipId})` }, root);
  });
  const axis = svg("g", { class: "axis" }, root);
  for (const t of spec.x.ticks || ticks(spec.x.domain, spec.x.log)) {  // x.ticks: chosen tick values
    svg("line", { x1: x(t), x2: x(t), y1: m.top, y2: height - m.bottom, class: "grid" }, axis);
    svg("text", { x: x(t), y: height - m.bottom + 16, "text-anchor": "middle" }, axis).textContent = tickLabel(t, spec.x.log);
  }
  for (const t of ticks(spec.y.domain, spec.y.log, 5)) {
    svg("line", { x1: m.left, x2: width - m.right, y1: y(t), y2: y(t), class: "grid" }, axis);
    svg("text", { x: m.left - 6, y: y(t) + 4, "text-anchor": "end" }, axis).textContent = tickLabel(t, spec.y.log);
  }
  svg("line", { x1: m.left, x2: width - m.right, y1: height - m.bottom, y2: height - m.bottom, class: "frame" }, axis);
  svg("line", { x1: m.left, x2: m.left, y1: m.top, y2: height - m.bottom, class: "frame" }, axis);
  if (spec.x.label) svg("text", { x: (m.left + width - m.right) / 2, y: height - 8, "text-anchor": "middle",
    class: "axis-label" }, axis).textContent = spec.x.label;
  if (spec.y.label) svg("text", { x: 14, y: (m.top + height - m.bottom) / 2, "text-anchor": "middle",
    transform: `rotate(-90 14 ${(m.top + height - m.bottom) / 2})`, class: "axis-label" }, axis).textContent = spec.y.label;

  const plot = svg("g", { "clip-path": `url(#${clipId})` }, root);
  const labels = [];
  for (const line of spec.hlines || []) {
    svg("line", { x1: m.left, x2: width - m.right, y1: y(line.y), y2: y(line.y), stroke: line.color || "#555",
      "stroke-dasharray": line.dash || "5 4", class: "marker-line" }, plot);
    if (line.label) labels.push({ at: y(line.y), text: line.label, color: line.color || "#555", left: line.left });
  }
  for (const line of spec.vlines || []) {
    svg("line", { x1: x(line.x), x2: x(line.x), y1: m.top, y2: height - m.bottom, stroke: line.color || "#555",
      "stroke-dasharray": line.dash || "5 4", class: "marker-line" }, plot);
  }
  const series = svg("g", { class: "series-layer" }, root);
  // Labels go on top of the curves: in the right margin when there is one, otherwise on white boxes.
  const front = svg("g", { class: "labels" }, root);
  if (outside) {
    labels.sort((a, b) => a.at - b.at);
    let next = m.top + 4;
    for (const label of labels) {
      const at = Math.min(height - m.bottom, Math.max(label.at + 4, next));
      svg("line", { x1: width - m.right, x2: width - m.right + 6, y1: label.at, y2: at - 4, stroke: label.color,
        class: "label-leader" }, front);
      svg("text", { x: width - m.right + 9, y: at, class: "marker-label", fill: label.color }, front).textContent = label.text;
      next = at + 13;
    }
  } else {
    for (const label of labels) {
      boxedLabel(front, { x: label.left ? m.left + 4 : width - m.right - 4, y: label.at - 4, text: label.text,
        color: label.color, anchor: label.left ? "start" : "end" });
    }
  }
  let bandRow = 0;
  for (const band of spec.bands || []) {
    if (!band.label) continue;
    boxedLabel(front, { x: Math.min(x(band.x0), x(band.x1)) + 4, y: m.top + 13 + 16 * bandRow++, text: band.label,
      color: band.color, cls: "band-label" });
  }
  for (const line of spec.vlines || []) {
    if (!line.label) continue;
    const px = x(line.x), flip = px > (m.left + width - m.right) / 2;
    boxedLabel(front, { x: px + (flip ? -4 : 4), y: height - m.bottom - 6, text: line.label, color: line.color || "#555",
      anchor: flip ? "end" : "start" });
  }
  for (const s of spec.series) {
    let d = "", pen = false;
    for (let i = 0; i < s.xs.length; i++) {
      const vx = s.xs[i], vy = s.ys[i];
      const ok = vy !== null && Number.isFinite(vy) && (!spec.y.log || vy > 0) && (!spec.x.log || vx > 0);
      if (!ok) { pen = false; continue; }
      d += `${pen ? "L" : "M"}${x(vx).toFixed(2)},${y(vy).toFixed(2)}`;
      pen = true;
    }
    svg("path", { d, fill: "none", stroke: s.color, "stroke-width": s.width || 2, "stroke-dasharray": s.dash,
      class: "series", "data-name": s.name, "clip-path": `url(#${clipId})` }, series);
    if (s.points) {
      for (let i = 0; i < s.xs.length; i++) {
        const vy = s.ys[i];
        if (vy === null || !Number.isFinite(vy) || (spec.y.log && vy <= 0)) continue;
        svg("circle", { cx: x(s.xs[i]), cy: y(vy), r: 2.5, fill: s.color, "clip-path": `url(#${clipId})` }, series);
      }
    }
  }
  if (spec.legend !== false) {
    const legend = html("div", { class: "legend" }, container);
    for (const s of spec.series.filter((s) => s.name && !s.hideLegend)) {
      const item = html("span", { class: "legend-item" }, legend);
      html("span", { class: "swatch", style: `background:${s.color}` }, item);
      item.appendChild(document.createTextNode(s.name));
    }
  }
  if (spec.onHover) {
    const cursor = svg("line", { y1: m.top, y2: height - m.bottom, class: "cursor", visibility: "hidden" }, root);
    const overlay = svg("rect", { x: m.left, y: m.top, width: width - m.left - m.right,
      height: height - m.top - m.bottom, fill: "transparent" }, root);
    overlay.addEventListener("mousemove", (event) => {
      const box = root.getBoundingClientRect();
      const px = ((event.clientX - box.left) / box.width) * width;
      const snapped = spec.onHover(x.invert(px));
      if (snapped !== undefined) {
        cursor.setAttribute("x1", x(snapped));
        cursor.setAttribute("x2", x(snapped));
        cursor.setAttribute("visibility", "visible");
      }
    });
  }
  return { root, x, y };
}

// -- heatmap ----------------------------------------------------------------------------------------
// Draws rows x cols of values onto a canvas, one block per cell; null cells are grey.
export function heatmap(canvas, matrix, colour, { cell = null, maxWidth = 560, maxHeight = 560 } = {}) {
  const rows = matrix.length, cols = rows ? matrix[0].length : 0;
  const size = cell || Math.max(1, Math.min(Math.floor(maxWidth / Math.max(1, cols)), Math.floor(maxHeight / Math.max(1, rows))));
  canvas.width = cols * size;
  canvas.height = rows * size;
  const ctx = canvas.getContext("2d");
  const image = ctx.createImageData(canvas.width, canvas.height);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      const v = matrix[r][c];
      const rgb = v === null ? [225, 225, 228] : colour(v);
      for (let dy = 0; dy < size; dy++) {
        let off = ((r * size + dy) * canvas.width + c * size) * 4;
        for (let dx = 0; dx < size; dx++, off += 4) {
          image.data[off] = rgb[0]; image.data[off + 1] = rgb[1]; image.data[off + 2] = rgb[2]; image.data[off + 3] = 255;
        }
      }
    }
  }
  ctx.putImageData(image, 0, 0);
  return size;
}

// Cell under a mouse event on a heatmap canvas.
export function cellAt(canvas, event, size) {
  const box = canvas.getBoundingClientRect();
  const px = ((event.clientX - box.left) / box.width) * canvas.width;
  const py = ((event.clientY - box.top) / box.height) * canvas.height;
  return { row: Math.floor(py / size), col: Math.floor(px / size) };
}

// -- clock dial ---------------------------------------------------------------------------------------
// hands: [{angle (radians, counter-clockwise from 3 o'clock), length in [0, 1], color, label,
// dash (optional stroke-dasharray, e.g. for a ghost hand)}]
// arc: {from, to, color, label} drawn between two angles, counter-clockwise when to > from.
// caption: one line of text, or an array of lines (the dial grows to fit them).
export function dial(container, { size = 150, hands = [], arc = null, title = "", caption = "", ticks: tickCount = 12 } = {}) {
  const lines = Array.isArray(caption) ? caption : caption ? [caption] : [];
  const root = svg("svg", { viewBox: `0 0 ${size} ${size + 18 + 15 * Math.max(1, lines.length)}`, class: "dial",
    role: "img", "aria-label": [title, ...lines].filter(Boolean).join("; ") }, container);
  const c = size / 2, r = size / 2 - 12;
  svg("circle", { cx: c, cy: c, r, class: "dial-face" }, root);
  for (let i = 0; i < tickCount; i++) {
    const a = (i / tickCount) * 2 * Math.PI;
    svg("line", { x1: c + Math.cos(a) * (r - 5), y1: c - Math.sin(a) * (r - 5), x2: c + Math.cos(a) * r,
      y2: c - Math.sin(a) * r, class: "dial-tick" }, root);
  }
  if (arc) {
    const rr = r * 0.5;
    const sweep = arc.to - arc.from;
    const large = Math.abs(sweep) > Math.PI ? 1 : 0;
    const x0 = c + Math.cos(arc.from) * rr, y0 = c - Math.sin(arc.from) * rr;
    const x1 = c + Math.cos(arc.to) * rr, y1 = c - Math.sin(arc.to) * rr;
    svg("path", { d: `M${c},${c} L${x0},${y0} A${rr},${rr} 0 ${large} ${sweep > 0 ? 0 : 1} ${x1},${y1} Z`,
      fill: arc.color, opacity: 0.3, class: "dial-arc", "data-from-deg": (arc.from * 180) / Math.PI,
      "data-sweep-deg": (sweep * 180) / Math.PI }, root);
  }
  for (const hand of hands) {
    const len = r * Math.max(0.08, Math.min(1, hand.length ?? 0.9));
    const x1 = c + Math.cos(hand.angle) * len, y1 = c - Math.sin(hand.angle) * len;
    svg("line", { x1: c, y1: c, x2: x1, y2: y1, stroke: hand.color, "stroke-width": hand.width || 3,
      "stroke-linecap": "round", "stroke-dasharray": hand.dash, class: hand.dash ? "dial-hand ghost" : "dial-hand",
      "data-angle-deg": (hand.angle * 180) / Math.PI }, root);
    if (hand.label) {
      const lx = c + Math.cos(hand.angle) * (len + 9), ly = c - Math.sin(hand.angle) * (len + 9) + 4;
      svg("text", { x: lx, y: ly, "text-anchor": "middle", class: "dial-label", fill: hand.color }, root).textContent = hand.label;
    }
  }
  svg("circle", { cx: c, cy: c, r: 3, fill: "#333" }, root);
  if (title) svg("text", { x: c, y: size + 12, "text-anchor": "middle", class: "dial-title" }, root).textContent = title;
  lines.forEach((line, i) => {
    svg("text", { x: c, y: size + 28 + 15 * i, "text-anchor": "middle", class: "dial-caption" }, root).textContent = line;
  });
  return root;
}

// -- bars -----------------------------------------------------------------------------------------------
// "2⁻⁵" for exact powers of two, else the plain number.
const SUPERSCRIPT = { "-": "⁻", 0: "⁰", 1: "¹", 2: "²", 3: "³", 4: "⁴", 5: "⁵", 6: "⁶", 7: "⁷", 8: "⁸", 9: "⁹" };
export function pow2Label(v) {
  const e = Math.log2(v);
  if (Math.abs(e - Math.round(e)) > 1e-9) return String(Number(v.toPrecision(3)));
  return "2" + String(Math.round(e)).split("").map((c) => SUPERSCRIPT[c]).join("");
}

export function bars(container, values, { width = 560, height = 120, colour = null, highlight = -1, log = false,
  label = "", domain = null, tickFormat = null, left = 48 } = {}) {
  container.replaceChildren();
  const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, class: "bars", role: "img", "aria-label": label }, container);
  const n = values.length, w = (width - left - 2) / Math.max(1, n);
  const finite = values.filter((v) => v !== null && Number.isFinite(v) && (!log || v > 0));
  let [lo, hi] = domain || (log ? extent([finite], { positiveOnly: true }) : [Math.min(0, ...finite), Math.max(0, ...finite)]);
  if (lo === hi) hi = lo + 1;
  const y = scale([lo, hi], [height - 14, 6], log);
  const zero = log ? height - 14 : y(0);
  svg("line", { x1: left - 2, x2: width, y1: zero, y2: zero, class: "frame" }, root);
  const tick = tickFormat || ((v) => tickLabel(v, false));
  svg("text", { x: left - 6, y: 12, "text-anchor": "end", class: "bar-tick" }, root).textContent = tick(hi);
  svg("text", { x: left - 6, y: height - 14, "text-anchor": "end", class: "bar-tick" }, root).textContent = tick(lo);
  values.forEach((v, i) => {
    if (v === null || !Number.isFinite(v) || (log && v <= 0)) return;
    const top = y(v);
    svg("rect", { x: left + i * w, y: Math.min(top, zero), width: Math.max(1, w - 1), height: Math.max(1, Math.abs(zero - top)),
      fill: colour ? colour(v, i) : MARK_COLOURS.bar, class: i === highlight ? "bar highlight" : "bar" }, root);
  });
  return root;
}

// -- colour scale -------------------------------------------------------------------------------------
// A horizontal strip of `colour(t)` for t from `t0` to `t1`, labelled with the values at both ends.
export function colourScale(container, colour, { lo, hi, t0 = 0, t1 = 1, label = "", width = 260, format = String } = {}) {
  container.replaceChildren();
  const steps = 32, h = 12, root = svg("svg", { viewBox: `0 0 ${width} 34`, class: "colour-scale", role: "img",
    "aria-label": `colour scale ${label}` }, container);
  const left = 4, span = width - 2 * left;
  for (let k = 0; k < steps; k++) {
    const t = t0 + ((k + 0.5) / steps) * (t1 - t0);
    svg("rect", { x: left + (k * span) / steps, y: 2, width: span / steps + 0.5, height: h,
      fill: `rgb(${colour(t).join(",")})` }, root);
  }
  svg("text", { x: left, y: 28, class: "bar-tick" }, root).textContent = format(lo);
  svg("text", { x: width / 2, y: 28, "text-anchor": "middle", class: "bar-tick" }, root).textContent = label;
  svg("text", { x: width - left, y: 28, "text-anchor": "end", class: "bar-tick" }, root).textContent = format(hi);
  return root;
}
