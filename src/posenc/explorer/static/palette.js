// The one palette of the page (mirrors posenc/explorer/palette.py; a test keeps them equal).
// A scheme or a scaling has one colour everywhere; a sign has one diverging map, blue below zero,
// red above, white at zero, always drawn with its legend (signLegend).

import { svg } from "./charts.js";

export const SCHEME_COLOURS = {
  nope: "#7f7f7f", sinusoidal: "#8c564b", learned: "#bcbd22", rope: "#1f77b4", alibi: "#000000",
};
export const SCALING_COLOURS = {
  default: "#1f77b4", linear: "#9467bd", ntk: "#2ca02c", dynamic: "#17becf", yarn: "#ff7f0e",
  llama3: "#e377c2", longrope: "#393b79", proportional: "#637939",
};
export const SIGN_COLOURS = { negative: "#2166ac", positive: "#b2182b" };
export const ROLE_COLOURS = { query: "#1f77b4", key: "#ff7f0e" };

function rgb(hex) { return [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16)); }

// A darker shade of a colour for text on white (at least 4.5:1 for every colour above).
export function textColour(hex) {
  return `rgb(${rgb(hex).map((c) => Math.round(c * 0.62)).join(",")})`;
}

// Short names the lesson's figures use.
export const PAL = {
  query: ROLE_COLOURS.query, key: ROLE_COLOURS.key,
  queryText: textColour(ROLE_COLOURS.query), keyText: textColour(ROLE_COLOURS.key),
};

// The sign map as [r, g, b] for t in [-1, 1].
export function divergingRGB(t) {
  const c = Math.max(-1, Math.min(1, t)), a = Math.abs(c);
  const far = rgb(c < 0 ? SIGN_COLOURS.negative : SIGN_COLOURS.positive);
  return far.map((v) => Math.round(255 + (v - 255) * Math.pow(a, 0.85)));
}

// The sign map as a CSS colour for a value on a scale from -span to +span.
export function diverging(v, span = 1) { return `rgb(${divergingRGB(v / (span || 1)).join(",")})`; }

// The sign map's legend: its label, then a gradient bar from -span to +span with its three numbers,
// starting at (x, y); 40 units tall.
export function signLegend(parent, { x, y, width = 160, span = 1, label = "value", format = (v) => String(v) }) {
  const g = svg("g", { class: "sign-legend", "data-span": span }, parent);
  const put = (tx, ty, content, anchor) => {
    const t = svg("text", { x: tx, y: ty, "font-size": 12, "text-anchor": anchor, fill: "#1d2330" }, g);
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
