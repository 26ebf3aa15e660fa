// The one palette of the page. Its tables (the colour of each scheme, scaling, sign, role, category,
// number format and mark; the scalings' labels and dashes; the reference lines' dashes; the series
// colours) are posenc/teaching/lesson/palette.py's, served as palette-tables.js written from that module, and
// re-exported here beside the page's colour functions. A scheme or a scaling has one colour everywhere;
// a sign has one diverging map, blue below zero, red above, white at zero, always drawn with its legend
// (charts.js signLegend). A colour means one thing: two colours of different meanings are at least 20
// apart in CIE76 ΔE (a test holds them to it). Every other colour of the page lives here too (a test
// fails on a chromatic colour written anywhere else in the page's scripts); neutral greys for ink, rules
// and frames may be written where they are used.

export * from "./palette-tables.js";
import { NEUTRAL_COLOURS, ROLE_COLOURS, SIGN_COLOURS } from "./palette-tables.js";

// The note that marks a machinery-check run.
export const STAMP_STYLE = "font-weight:600;background:#fff3cd;color:#3d2e00;padding:0.4em 0.7em;border-left:4px solid #b58100";

export const INK = NEUTRAL_COLOURS.ink;
export const MUTED = "#4b5262";   // secondary text, not a meaning

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
function viridisRGB(t) {
  const c = Math.max(0, Math.min(1, t)) * (VIRIDIS.length - 1);
  const i = Math.min(VIRIDIS.length - 2, Math.floor(c)), f = c - i;
  return VIRIDIS[i].map((v, k) => Math.round(v + (VIRIDIS[i + 1][k] - v) * f));
}
export function viridis(t) { return `rgb(${viridisRGB(t).join(",")})`; }

// CIE L*a*b* (D65) of an [r, g, b] colour, to measure how far apart two colours look (CIE76 ΔE).
export function lab([r, g, b]) {
  const lin = [r, g, b].map((c) => { const v = c / 255; return v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
  const xyz = [[0.4124, 0.3576, 0.1805, 0.95047], [0.2126, 0.7152, 0.0722, 1], [0.0193, 0.1192, 0.9505, 1.08883]]
    .map(([p, q, s, white]) => (p * lin[0] + q * lin[1] + s * lin[2]) / white);
  const f = (t) => (t > (6 / 29) ** 3 ? Math.cbrt(t) : t / (3 * (6 / 29) ** 2) + 4 / 29);
  const [fx, fy, fz] = xyz.map(f);
  return [116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)];
}
export function deltaE(a, b) { return Math.hypot(...lab(a).map((v, k) => v - lab(b)[k])); }

// Colour of ALiBi head `h` of `n`, in the workbench and the lesson alike: dark purple (steepest slope)
// to yellow-green (gentlest), never the pale end of viridis, which vanishes on white. The heads are
// spaced evenly in how different they look (ΔE), not in t: viridis's dark end changes slowly, and
// evenly spaced t once drew heads 0 and 1 as one purple.
const HEAD_END = 0.88, HEAD_SAMPLES = 200;
const headRamp = (() => {
  const ts = [...Array(HEAD_SAMPLES + 1).keys()].map((i) => (HEAD_END * i) / HEAD_SAMPLES);
  const rgbs = ts.map(viridisRGB), run = [0];
  for (let i = 1; i < rgbs.length; i++) run.push(run[i - 1] + deltaE(rgbs[i - 1], rgbs[i]));
  return { ts, run };
})();
export function headColour(h, n) {
  if (n <= 1) return viridis(0);
  const want = (headRamp.run[HEAD_SAMPLES] * h) / (n - 1);
  let i = 1;
  while (i < HEAD_SAMPLES && headRamp.run[i] < want) i++;
  const f = (want - headRamp.run[i - 1]) / (headRamp.run[i] - headRamp.run[i - 1] || 1);
  return viridis(headRamp.ts[i - 1] + f * (headRamp.ts[i] - headRamp.ts[i - 1]));
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
