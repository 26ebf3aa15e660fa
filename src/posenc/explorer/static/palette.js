// The one palette of the page (mirrors posenc/explorer/palette.py; a test keeps them equal).
// A scheme or a scaling has one colour everywhere; a sign has one diverging map, blue below zero,
// red above, white at zero, always drawn with its legend (charts.js signLegend).

export const SCHEME_COLOURS = {
  nope: "#7f7f7f", sinusoidal: "#8c564b", learned: "#bcbd22", rope: "#1f77b4", alibi: "#000000",
};
export const SCALING_COLOURS = {
  default: "#1f77b4", linear: "#9467bd", ntk: "#2ca02c", dynamic: "#17becf", yarn: "#ff7f0e",
  llama3: "#e377c2", longrope: "#393b79", proportional: "#637939",
};
// A scaling's curve is drawn with its one dash pattern too (absent: solid), in the lesson and the workbench.
export const SCALING_DASHES = { linear: "7 4" };
export const SIGN_COLOURS = { negative: "#2166ac", positive: "#b2182b" };
// A query and a key (the dials): colours of their own, not RoPE's blue or YaRN's orange.
export const ROLE_COLOURS = { query: "#3b4cc0", key: "#e08214" };

// Every other colour of the page lives here too (a test fails on a chromatic colour written anywhere
// else in the page's scripts); neutral greys for ink, rules and frames may be written where they are used.
// A colour means one thing: no colour of the tables above and below stands for two things (a test
// holds them to that), and series colours are none of them.
// Number formats compared in the precision view.
export const DTYPE_COLOURS = { bfloat16: "#d95f02", float16: "#e7298a", float32: "#1b9e77", posenc: "#7570b3" };
// Series with no meaning of their own (one line per length, per run...), in order; none is a colour
// that means something above.
export const SERIES_COLOURS = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
  "#ff9da7", "#9c755f", "#bab0ac"];
// Marks: the rotation pair picked on a dial (every view marks it in this colour), a trend drawn over
// its own series, bars without a colour of their own. (Plain RoPE among the scalings is
// SCALING_COLOURS.default, the rope colour, in every view.)
export const MARK_COLOURS = { focus: "#6a51a3", trend: "#08306b", bar: "#4c78a8" };
// The lesson's word tiles, and the note that marks a machinery-check run.
export const TILE_COLOURS = { fill: "#f3ead7", stroke: "#b08d57" };
export const STAMP_STYLE = "font-weight:600;background:#fff3cd;color:#3d2e00;padding:0.4em 0.7em;border-left:4px solid #b58100";

// The lesson's Okabe-Ito set (readers with any common colour-vision deficiency can tell them apart),
// text-safe (4.5:1 on white) variants for labels, and its ordered series (lines also differ in dash).
export const INK = "#1d2330";
export const MUTED = "#4b5262";
export const C = {
  blue: "#0072B2", orange: "#E69F00", green: "#009E73", vermillion: "#D55E00", purple: "#CC79A7",
  sky: "#56B4E9", yellow: "#F0E442", grey: "#8a8f99",
};
export const T = { blue: "#005a8c", orange: "#8a5a00", green: "#00684c", vermillion: "#a64300", purple: "#8c3f73" };
export const SERIES = [
  { color: C.blue, dash: null }, { color: C.vermillion, dash: "7 4" }, { color: C.green, dash: "2 3" },
  { color: C.orange, dash: "10 3 2 3" }, { color: C.purple, dash: "4 2" },
];

function rgb(hex) { return [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16)); }

// A darker shade of a colour for text on white (at least 4.5:1 for every colour above).
export function textColour(hex) {
  return `rgb(${rgb(hex).map((c) => Math.round(c * 0.62)).join(",")})`;
}

// A magnitude (zero and up) as [r, g, b]: light yellow to dark blue, t in [0, 1].
const SEQUENTIAL = [[255, 247, 188], [127, 205, 187], [44, 127, 184], [37, 52, 148], [8, 29, 88]];
export function sequential(t) {
  const c = Math.max(0, Math.min(1, t));
  const pos = c * (SEQUENTIAL.length - 1), i = Math.min(SEQUENTIAL.length - 2, Math.floor(pos)), f = pos - i;
  return SEQUENTIAL[i].map((v, k) => Math.round(v + (SEQUENTIAL[i + 1][k] - v) * f));
}

// Viridis (perceptually ordered, readable with every common colour-vision deficiency) as a CSS colour,
// sampled at t in [0, 1]; stops from matplotlib's table.
const VIRIDIS = [[68, 1, 84], [72, 40, 120], [62, 74, 137], [49, 104, 142], [38, 130, 142], [31, 158, 137],
  [53, 183, 121], [109, 205, 89], [180, 222, 44], [253, 231, 37]];
export function viridis(t) {
  const c = Math.max(0, Math.min(1, t)) * (VIRIDIS.length - 1);
  const i = Math.min(VIRIDIS.length - 2, Math.floor(c)), f = c - i;
  const mixed = VIRIDIS[i].map((v, k) => Math.round(v + (VIRIDIS[i + 1][k] - v) * f));
  return `rgb(${mixed.join(",")})`;
}

// Colour of ALiBi head `h` of `n`, in the workbench and the lesson alike: dark purple (steepest slope)
// to yellow-green (gentlest), never the pale end of viridis, which vanishes on white.
export function headColour(h, n) {
  return viridis(n > 1 ? (0.88 * h) / (n - 1) : 0);
}

// A table cell shaded by a share a in [0, 1] (a blue ramp), with text that stays readable on it.
export function shadeStyle(a) {
  return `background:hsl(210,65%,${Math.round(96 - 62 * a)}%);color:${a > 0.55 ? "#fff" : "#111"}`;
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
