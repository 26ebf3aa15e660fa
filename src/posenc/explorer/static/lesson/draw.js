// Drawing helpers of the lesson. Every figure is drawn at the width of its box (one SVG unit = one
// CSS pixel), so text drawn at 12 units is 12 px on any screen. Colours are the Okabe-Ito set,
// which readers with any common colour-vision deficiency can tell apart; lines also differ in dash.

import { svg, html, fmt, fmtInt } from "../charts.js";
import { diverging, SIGN_COLOURS, signLegend, INK, MUTED, C, T, SERIES } from "../palette.js";

export { signLegend, INK, MUTED, C, T, SERIES };

export { svg, html, fmt, fmtInt };

export function widthOf(holder, max = 720, min = 260) {
  const w = holder.clientWidth || holder.getBoundingClientRect().width || 320;
  return Math.max(min, Math.min(max, Math.floor(w)));
}

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

// The sign map of the whole page (palette.js): blue below zero, red above, white at zero.
export function divergingFill(v, span = 1) { return diverging(v, span); }

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
    svg("path", { d: `M${cx},${cy} L${x0},${y0} A${rr},${rr} 0 ${large} ${dir} ${x1},${y1} Z`, fill: arc.color || C.purple,
      "fill-opacity": 0.3, stroke: arc.color || C.purple, class: "turn-arc" }, g);
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

export function signed(v, digits = 1) {
  const s = fmt(v, digits);
  return v > 0 ? `+${s}` : s;
}

// Text alternative of a figure: one line per item, written into a .numbers element.
export function numbers(node, lines) {
  node.replaceChildren();
  const list = html("ul", {}, node);
  for (const line of lines) html("li", {}, list, line);
}

// A horizontal bar chart of labelled values on a linear axis from 0 to `max` (ticks at 0, half and
// the top, so the scale is always stated). Each label sits above its bar and the value at the bar's
// end, so nothing is cut off on a narrow screen. An item with `rounding: true` is drawn as zero and
// labelled as rounding, with its tiny value beside the word.
export function hbars(holder, items, { label, format = (v) => fmt(v, 4), max = null, unit = "" }) {
  const width = widthOf(holder, 640), rowH = 44, room = width - 150, axisH = 30;
  const height = items.length * rowH + axisH;
  const s = root(holder, width, height, label);
  const top = max ?? Math.max(...items.map((it) => (it.rounding ? 0 : it.value)), 1e-12);
  const pos = (v) => (Math.max(0, Math.min(v, top)) / top) * room;
  items.forEach((it, i) => {
    const y = 2 + i * rowH;
    text(s, 0, y + 13, it.label, { size: 12 });
    const w = it.rounding ? 0 : pos(it.value);
    svg("rect", { x: 0, y: y + 19, width: w, height: 18, fill: it.color || C.blue, class: "bar",
      "data-value": it.value, "data-rounding": it.rounding ? "true" : "false" }, s);
    const shown = it.rounding ? `0 (rounding: ${fmt(it.value, 2)})` : format(it.value);
    text(s, w + 5, y + 33, shown, { size: 12, weight: it.rounding ? 700 : null }).setAttribute("class", "bar-value");
  });
  const y0 = items.length * rowH + 4;
  svg("line", { x1: 0, x2: room, y1: y0, y2: y0, stroke: "#8a8f99", class: "axis" }, s);
  // the middle tick is labelled only where its label clears the two ends (long numbers on a phone)
  const labels = [0, 0.5, 1].map((t) => `${format(t * top)}${t === 1 && unit ? ` ${unit}` : ""}`);
  const chars = (k) => labels[k].length * 7.2;
  const middleFits = room / 2 - chars(1) / 2 > chars(0) + 6 && room / 2 + chars(1) / 2 < room - chars(2) - 6;
  [0, 0.5, 1].forEach((t, k) => {
    const x = t * room;
    svg("line", { x1: x, x2: x, y1: y0, y2: y0 + 5, stroke: "#8a8f99" }, s);
    if (k === 1 && !middleFits) return;
    text(s, x, y0 + 18, labels[k],
      { size: 12, anchor: t === 0 ? "start" : t === 1 ? "end" : "middle", color: MUTED }).setAttribute("class", "tick");
  });
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
