// The explorer's one chart module, for the workbench and the lesson alike: SVG line charts, canvas
// heatmaps, clock dials, bars, the sign map's legend and the lesson's figure helpers. It only draws
// numbers handed to it by the server; nothing here computes an encoding. Every colour comes from
// palette.js, and every figure is drawn at its panel's width (one SVG unit = one CSS pixel where the
// lesson draws with root(), so text drawn at 12 units is 12 px on any screen).

import { INK, MARK_COLOURS, MUTED, NEUTRAL_COLOURS, SIGN_COLOURS, diverging, divergingRGB } from "./palette.js";
import { MINUS, minus } from "./formats.js";

// the lesson's number formats (formats.js), for the scripts that draw with this module
export { minus, sci, signed } from "./formats.js";

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
  if (!Number.isFinite(value)) return value > 0 ? "∞" : `${MINUS}∞`;
  const size = Math.abs(value);
  if (size !== 0 && (size < 1e-3 || size >= 1e6)) return minus(value.toExponential(Math.max(1, digits - 2)));
  return minus(value.toFixed(digits));
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

// The labels of one axis's ticks: each exact for its tick (to a millionth of the axis's smallest gap,
// which absorbs the rounding of the tick loop) and so no two alike, written as the page writes numbers:
// thousands grouped ("150,000"), "−" for minus, and exponent form ("1e6", "2.5e-4") outside 0.001 to
// 1,000,000 like fmt; a log axis, whose decades reach far, from 100,000 (so a label is at most "10,000"
// wide and clears the axis title). Every axis reads in one form: all exponent when any tick needs it.
export function tickLabels(values, log = false) {
  const sorted = [...values].sort((a, b) => a - b);
  let gap = Infinity;
  for (let i = 1; i < sorted.length; i++) if (sorted[i] > sorted[i - 1]) gap = Math.min(gap, sorted[i] - sorted[i - 1]);
  const tol = (v) => Math.max(Number.isFinite(gap) ? gap * 1e-6 : 0, Math.abs(v) * 1e-12);
  const high = log ? 1e5 : 1e6;
  const far = (v) => Math.abs(v) > tol(v) && (Math.abs(v) < 1e-3 || Math.abs(v) >= high);
  const anyFar = values.some(far);  // one form per axis, log or linear: never "1e6" beside "100,000"
  const fewest = (v, write) => {  // the shortest writing of v that reads back within tolerance
    for (let d = 0; d < 20; d++) if (Math.abs(Number(write(d)) - v) <= tol(v)) return write(d);
    return write(20);
  };
  return values.map((v) => {
    if (Math.abs(v) <= tol(v) || v === 0) return "0";
    let text;
    if (anyFar) {
      const [mantissa, exponent] = fewest(v, (d) => v.toExponential(d)).split("e");
      text = `${mantissa}e${Number(exponent)}`;
    } else {
      const [whole, part] = fewest(v, (d) => v.toFixed(d)).split(".");
      text = whole.replace(/\B(?=(\d{3})+(?!\d))/g, ",") + (part ? `.${part}` : "");
    }
    return minus(text);
  });
}

// The label of a lone value on an axis (the ends of a bar chart's scale).
function tickLabel(v, log) {
  return tickLabels([v], log)[0];
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
// spec: {width, height, x: {domain, log, label}, y: {domain, log, label}, series: [{name, key, xs, ys, color,
// dash, width, points}], hlines: [{y, label, color, dash}], vlines: [{x, label, color}],
// bands: [{x0, x1, color, label}], labelsOutside (hline labels in a right margin of that width),
// onHover(xValue) -> optional}
// A log axis has no 0: with y.zero (a value below every other one on the axis), a value of exactly 0 is
// drawn on that row, whose tick reads "exact (0)" (class zero-tick) instead of a number, and a solid rule
// sets the row apart from the numbers above it.
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
  const xTicks = spec.x.ticks || ticks(spec.x.domain, spec.x.log);  // x.ticks: chosen tick values
  const xLabels = tickLabels(xTicks, spec.x.log);
  xTicks.forEach((t, i) => {
    svg("line", { x1: x(t), x2: x(t), y1: m.top, y2: height - m.bottom, class: "grid" }, axis);
    svg("text", { x: x(t), y: height - m.bottom + 16, "text-anchor": "middle" }, axis).textContent = xLabels[i];
  });
  const zero = spec.y.log && spec.y.zero ? spec.y.zero : null;
  // the zero row and the decade just above it carry no number
  const yTicks = ticks(spec.y.domain, spec.y.log, 5).filter((t) => zero === null || t >= zero * 10 * (1 + 1e-9));
  const yLabels = tickLabels(yTicks, spec.y.log);
  yTicks.forEach((t, i) => {
    svg("line", { x1: m.left, x2: width - m.right, y1: y(t), y2: y(t), class: "grid" }, axis);
    svg("text", { x: m.left - 6, y: y(t) + 4, "text-anchor": "end" }, axis).textContent = yLabels[i];
  });
  if (zero !== null) {
    const at = y(zero), rule = (at + y(zero * 10)) / 2;
    svg("line", { x1: m.left, x2: width - m.right, y1: rule, y2: rule, class: "frame zero-rule" }, axis);
    svg("text", { x: m.left - 6, y: at + 4, "text-anchor": "end", class: "zero-tick", "data-value": zero }, axis)
      .textContent = "exact (0)";
  }
  const shown = (v) => (zero !== null && v === 0 ? zero : v);
  svg("line", { x1: m.left, x2: width - m.right, y1: height - m.bottom, y2: height - m.bottom, class: "frame" }, axis);
  svg("line", { x1: m.left, x2: m.left, y1: m.top, y2: height - m.bottom, class: "frame" }, axis);
  if (spec.x.label) svg("text", { x: (m.left + width - m.right) / 2, y: height - 8, "text-anchor": "middle",
    class: "axis-label" }, axis).textContent = spec.x.label;
  if (spec.y.label) svg("text", { x: 12, y: (m.top + height - m.bottom) / 2, "text-anchor": "middle",
    transform: `rotate(-90 12 ${(m.top + height - m.bottom) / 2})`, class: "axis-label" }, axis).textContent = spec.y.label;

  const plot = svg("g", { "clip-path": `url(#${clipId})` }, root);
  const labels = [];
  for (const line of spec.hlines || []) {
    svg("line", { x1: m.left, x2: width - m.right, y1: y(line.y), y2: y(line.y), stroke: line.color || NEUTRAL_COLOURS.reference,
      "stroke-dasharray": line.dash || "5 4", class: "marker-line" }, plot);
    if (line.label) labels.push({ at: y(line.y), text: line.label, color: line.color || NEUTRAL_COLOURS.reference, left: line.left });
  }
  for (const line of spec.vlines || []) {
    svg("line", { x1: x(line.x), x2: x(line.x), y1: m.top, y2: height - m.bottom, stroke: line.color || NEUTRAL_COLOURS.reference,
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
    boxedLabel(front, { x: px + (flip ? -4 : 4), y: height - m.bottom - 6, text: line.label, color: line.color || NEUTRAL_COLOURS.reference,
      anchor: flip ? "end" : "start" });
  }
  for (const s of spec.series) {
    let d = "", pen = false;
    for (let i = 0; i < s.xs.length; i++) {
      const vx = s.xs[i], vy = shown(s.ys[i]);
      const ok = vy !== null && Number.isFinite(vy) && (!spec.y.log || vy > 0) && (!spec.x.log || vx > 0);
      if (!ok) { pen = false; continue; }
      d += `${pen ? "L" : "M"}${x(vx).toFixed(2)},${y(vy).toFixed(2)}`;
      pen = true;
    }
    svg("path", { d, fill: "none", stroke: s.color, "stroke-width": s.width || 2, "stroke-dasharray": s.dash,
      class: "series", "data-name": s.name, "data-key": s.key, "clip-path": `url(#${clipId})` }, series);
    if (s.points) {
      for (let i = 0; i < s.xs.length; i++) {
        const vy = shown(s.ys[i]);
        if (vy === null || !Number.isFinite(vy) || (spec.y.log && vy <= 0)) continue;
        svg("circle", { cx: x(s.xs[i]), cy: y(vy), r: 2.5, fill: s.color, "clip-path": `url(#${clipId})` }, series);
      }
    }
  }
  if (spec.legend !== false) {
    const legend = html("div", { class: "legend" }, container);
    // each swatch is a short stretch of its series' line: its colour, width and dash
    for (const s of spec.series.filter((s) => s.name && !s.hideLegend)) {
      const item = html("span", { class: "legend-item", "data-name": s.name }, legend);
      const swatch = svg("svg", { class: "swatch-line", viewBox: "0 0 28 10", width: 28, height: 10, "aria-hidden": "true" }, item);
      svg("line", { x1: 1, x2: 27, y1: 5, y2: 5, stroke: s.color, "stroke-width": Math.max(2, s.width || 2),
        "stroke-dasharray": s.dash }, swatch);
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

// -- the sign map's legend ------------------------------------------------------------------------------
// The sign map's legend: its label, then a gradient bar from -span to +span with its three numbers,
// starting at (x, y); 40 units tall.
export function signLegend(parent, { x, y, width = 160, span = 1, label = "value", format = (v) => String(v) }) {
  const g = svg("g", { class: "sign-legend", "data-span": span }, parent);
  const put = (tx, ty, content, anchor) => {
    const t = svg("text", { x: tx, y: ty, "font-size": 12, "text-anchor": anchor, fill: INK }, g);
    t.textContent = content;
  };
  put(x, y + 10, `${label} (blue −, red +)`, "start");
  const steps = 24, w = width / steps, top = y + 15;
  for (let i = 0; i < steps; i++) {
    const t = -1 + (2 * (i + 0.5)) / steps;
    svg("rect", { x: x + i * w, y: top, width: w + 0.5, height: 10, fill: diverging(t) }, g);
  }
  svg("rect", { x, y: top, width, height: 10, fill: "none", stroke: "#8a8f99" }, g);
  put(x, top + 24, `−${format(span)}`, "start");
  put(x + width / 2, top + 24, "0", "middle");
  put(x + width, top + 24, `+${format(span)}`, "end");
  return g;
}

// The sign map's legend for a figure drawn outside an SVG of its own (a canvas, a bar chart): a colour
// scale from −span to +span in its own holder, marked sign-legend like signLegend's.
export function signScale(container, { span = 1, label = "value", width = 260, format = (v) => fmt(v, 2) } = {}) {
  const root = colourScale(container, divergingRGB, { lo: -span, hi: span, t0: -1, t1: 1,
    label: `${label} (blue −, red +)`, width, format });
  root.classList.add("sign-legend");
  root.dataset.span = span;
  return root;
}

// The legend of bars coloured by their sign only (the two ends of the sign map): a swatch of each,
// with what the sign means.
export function signKey(container, { negative, positive }) {
  container.replaceChildren();
  const box = html("div", { class: "legend sign-legend", role: "note" }, container);
  for (const [sign, text] of [["negative", negative], ["positive", positive]]) {
    const item = html("span", { class: "legend-item" }, box);
    html("span", { class: "swatch sign-swatch", "data-sign": sign, style: `background:${SIGN_COLOURS[sign]}` }, item);
    item.appendChild(document.createTextNode(text));
  }
  return box;
}

// -- the width of every figure -------------------------------------------------------------------------
// The one rule for sizing a figure, in the workbench and the lesson alike: it is drawn at its holder's
// content width, so one SVG unit is one CSS pixel and chart text keeps its CSS size on any screen. No
// figure passes a width cap of its own: a holder's size is CSS's business (the lesson's column and the
// workbench's panels have their widths there; a figure with a natural size, a clock or the rotation
// plane, has a holder of that size), and core.js's one resize mechanism redraws at the new width.
// `min` keeps a figure legible in a very narrow holder. A holder not laid out (a hidden panel) gets
// `fallback` and is marked data-unsized, so that mechanism redraws it when it is shown.
export function widthOf(holder, { min = 240, fallback = 560 } = {}) {
  const style = getComputedStyle(holder);
  const room = Math.floor(holder.clientWidth - parseFloat(style.paddingLeft || 0) - parseFloat(style.paddingRight || 0));
  if (room > 0) delete holder.dataset.unsized; else holder.dataset.unsized = "true";
  return Math.max(min, room > 0 ? room : fallback);
}

// -- the lesson's figures --------------------------------------------------------------------------------

export function root(holder, width, height, label) {
  holder.replaceChildren();
  return svg("svg", { viewBox: `0 0 ${width} ${height}`, width, height, class: "lesson-svg", role: "img",
    "aria-label": label }, holder);
}

export function text(parent, x, y, content, { size = 12, anchor = "start", color = INK, weight = null } = {}) {
  const node = svg("text", { x, y, "text-anchor": anchor, "font-size": size, fill: color, "font-weight": weight },
    parent);
  node.textContent = content;
  return node;
}

// A row of vertical bars for one vector, centred on a zero line, each bar coloured by its sign with
// the page's one sign map (so a colour means the same sign in every chapter). Returns the row's height.
export function barRow(parent, values, { x, y, width, height = 60, span = null, label = "", row = null }) {
  const top = span || Math.max(1e-12, ...values.map((v) => Math.abs(v)));
  const zero = y + height / 2, w = width / values.length;
  svg("line", { x1: x, x2: x + width, y1: zero, y2: zero, stroke: "#9aa1ad" }, parent);
  values.forEach((v, i) => {
    const h = (Math.abs(v) / top) * (height / 2 - 2);
    svg("rect", { x: x + i * w + 1, y: v >= 0 ? zero - h : zero, width: Math.max(1, w - 2), height: Math.max(0.5, h),
      fill: v >= 0 ? SIGN_COLOURS.positive : SIGN_COLOURS.negative, class: "bar", "data-value": v, "data-row": row }, parent);
  });
  if (label) text(parent, x, y - 4, label, { size: 12, color: INK, weight: 600 });
  return height;
}

// A clock dial: a face, tick marks every 30°, hands at angles (radians, counter-clockwise from
// 3 o'clock, y up), an optional ghost hand (dashed, the vector before a turn) and a shaded turn arc.
export function clock(parent, { cx, cy, r, hands = [], ghost = null, arc = null }) {
  const g = svg("g", { class: "clock" }, parent);
  svg("circle", { cx, cy, r, fill: "#fff", stroke: "#8a8f99", "stroke-width": 1.5 }, g);
  for (let i = 0; i < 12; i++) {
    const a = (i / 12) * 2 * Math.PI;
    svg("line", { x1: cx + Math.cos(a) * (r - 5), y1: cy - Math.sin(a) * (r - 5), x2: cx + Math.cos(a) * r,
      y2: cy - Math.sin(a) * r, stroke: "#b9bec8" }, g);
  }
  if (arc && Math.abs(arc.sweep) > 1e-9) {
    const rr = r * 0.42, sweep = Math.max(-2 * Math.PI + 1e-6, Math.min(2 * Math.PI - 1e-6, arc.sweep));
    const end = arc.from + sweep;
    const x0 = cx + Math.cos(arc.from) * rr, y0 = cy - Math.sin(arc.from) * rr;
    const x1 = cx + Math.cos(end) * rr, y1 = cy - Math.sin(end) * rr;
    const large = Math.abs(sweep) > Math.PI ? 1 : 0, dir = sweep > 0 ? 0 : 1;
    svg("path", { d: `M${cx},${cy} L${x0},${y0} A${rr},${rr} 0 ${large} ${dir} ${x1},${y1} Z`, fill: arc.color || MUTED,
      "fill-opacity": 0.3, stroke: arc.color || MUTED, class: "turn-arc" }, g);
  }
  const drawHand = (hand, dashed) => {
    const len = r * Math.max(0.1, Math.min(1, hand.length ?? 0.85));
    const x1 = cx + Math.cos(hand.angle) * len, y1 = cy - Math.sin(hand.angle) * len;
    svg("line", { x1: cx, y1: cy, x2: x1, y2: y1, stroke: hand.color, "stroke-width": hand.width || (dashed ? 2 : 3.5),
      "stroke-dasharray": dashed ? "4 3" : null, "stroke-linecap": "round", class: dashed ? "ghost-hand" : "hand" }, g);
    if (hand.label) {
      const lx = cx + Math.cos(hand.angle) * (len + 11), ly = cy - Math.sin(hand.angle) * (len + 11) + 4;
      text(g, lx, ly, hand.label, { size: 12, anchor: "middle", color: hand.textColor || INK, weight: 700 });
    }
  };
  if (ghost) drawHand({ ...ghost, color: ghost.color || "#6b7280" }, true);
  for (const hand of hands) drawHand(hand, false);
  svg("circle", { cx, cy, r: 3, fill: INK }, g);
  return g;
}

export function deg(rad) { return (rad * 180) / Math.PI; }
export function rad(d) { return (d * Math.PI) / 180; }
export function mod360(d) { return ((d % 360) + 360) % 360; }

// Text alternative of a figure: one line per item, written into a .numbers element.
export function numbers(node, lines) {
  node.replaceChildren();
  const list = html("ul", {}, node);
  for (const line of lines) html("li", {}, list, line);
}

// A horizontal bar chart of labelled values on a linear axis from 0, with ticks at round numbers (1, 2 or
// 5 × 10^k apart, as the line charts' axes) and an axis title saying what is measured (`axis`, else
// `label`; `unit` is added to it). The axis ends at the first tick at or past `max` (default: the
// largest value), so the scale is always stated. Each label sits above its bar and the value at the
// bar's end, so nothing is cut off on a narrow screen. An item with `rounding: true` is drawn as zero
// and labelled as rounding, with its tiny value beside the word; a value past the axis's end (only
// where `max` is set below it) is drawn to the end and its label says so.
export function hbars(holder, items, { label, axis = null, format = (v) => fmt(v, 4), max = null, unit = "" }) {
  const width = widthOf(holder), rowH = 44, room = width - 150, axisH = 44;
  const height = items.length * rowH + axisH;
  const s = root(holder, width, height, label);
  const want = max ?? Math.max(...items.map((it) => (it.rounding ? 0 : it.value)), 1e-12);
  // as many round ticks as fit under the bars with their labels apart
  let values = [0, want], labels = tickLabels(values);
  for (let count = Math.max(2, Math.floor(room / 90)); count >= 1; count--) {
    const step = niceStep(want, count), last = Math.ceil(want / step - 1e-9) * step;
    const vs = [];
    for (let k = 0; k * step <= last + step * 1e-9; k++) vs.push(k * step);
    const ls = tickLabels(vs), gap = room / (vs.length - 1);
    values = vs; labels = ls;
    if (ls.every((t, k) => k === 0 || (t.length + ls[k - 1].length) * 3.6 + 8 < gap)) break;
  }
  const top = values[values.length - 1];
  const pos = (v) => (Math.max(0, Math.min(v, top)) / top) * room;
  items.forEach((it, i) => {
    const y = 2 + i * rowH;
    text(s, 0, y + 13, it.label, { size: 12 });
    const w = it.rounding ? 0 : pos(it.value);
    svg("rect", { x: 0, y: y + 19, width: w, height: 18, fill: it.color || MARK_COLOURS.bar, class: "bar",
      "data-value": it.value, "data-rounding": it.rounding ? "true" : "false" }, s);
    const past = !it.rounding && it.value > top * (1 + 1e-9);
    const shown = it.rounding ? `0 (rounding: ${fmt(it.value, 2)})` : `${format(it.value)}${past ? " (past the axis)" : ""}`;
    text(s, w + 5, y + 33, shown, { size: 12, weight: it.rounding ? 700 : null }).setAttribute("class", "bar-value");
  });
  const y0 = items.length * rowH + 4;
  const g = svg("g", { class: "hbar-axis", "data-top": top }, s);
  svg("line", { x1: 0, x2: room, y1: y0, y2: y0, stroke: "#8a8f99", class: "axis" }, g);
  values.forEach((v, k) => {
    const x = pos(v);
    svg("line", { x1: x, x2: x, y1: y0, y2: y0 + 5, stroke: "#8a8f99" }, g);
    const t = text(g, x, y0 + 18, labels[k], { size: 12, anchor: k === 0 ? "start" : "middle", color: MUTED });
    t.setAttribute("class", "tick");
    t.dataset.value = String(v);
  });
  const title = `${axis || label}${unit ? ` (${unit})` : ""}`;
  text(g, 0, y0 + 36, title, { size: 12, color: MUTED }).setAttribute("class", "axis-title");
  return s;
}

// Names every cell after its column's heading (data-label), so a narrow screen can show the table
// as one card per row (CSS: table.stack) without losing what each number is.
export function stackLabels(table) {
  table.classList.add("stack");
  const heads = [...table.querySelectorAll("thead th")].map((th) => th.textContent.replace(/\?$/, ""));
  for (const tr of table.querySelectorAll("tbody tr")) {
    [...tr.children].forEach((cell, i) => { if (cell.tagName === "TD" && heads[i]) cell.dataset.label = heads[i]; });
  }
}
