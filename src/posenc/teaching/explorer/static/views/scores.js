// View 3 of the explorer: score vs distance.

import { extent, fmt, fmtInt, html, lineChart, widthOf } from "../charts.js";
import { $, COLORS, rope, api, loader, slider, pow10, valueSpan, register } from "../core.js";
import { headColour, onResize } from "./workbench.js";
import { MARK_COLOURS } from "../palette.js";

// RoPE's decay runs over every scale of distance (pair i fades after about 1/θ_i seats), so the view opens
// on the whole range, drawn against log distance, where each octave gets the same width.
const DEFAULT_MAX = 2048;

export function setupScores() {
  let data = null;
  const maxInput = $("sc-max"), atInput = $("sc-at");
  if (Number(maxInput.max) >= DEFAULT_MAX) {
    maxInput.value = DEFAULT_MAX;
    atInput.max = DEFAULT_MAX;
  }
  const controls = maxInput.closest(".controls");
  const logLabel = html("label", {}, controls);
  const logBox = html("input", { type: "checkbox", id: "sc-log", checked: "" }, logLabel);
  logLabel.appendChild(document.createTextNode(" log distance axis"));
  logBox.addEventListener("change", () => draw());

  const maxD = slider("sc-max", (v) => { atInput.max = v; refresh(); });
  const dModel = slider("sc-dmodel", () => refresh());
  const heads = slider("sc-heads", () => refresh());
  const compare = slider("sc-compare-log", () => refresh(), pow10, fmtInt);
  const at = slider("sc-at", () => draw());

  const refresh = loader("scores", async (signal) => {
    data = await api("/api/scores", { head_dim: rope.headDim, base: rope.base, d_model: dModel(),
      sin_base: 10000, heads: heads(), max_distance: maxD(), compare_base: compare() }, signal);
    draw();
  });

  // Long ranges come back sampled; the readout shows the nearest distance the server computed.
  function nearest(distance) {
    const ds = data.distances;
    let lo = 0, hi = ds.length - 1;
    while (hi - lo > 1) { const mid = (lo + hi) >> 1; if (ds[mid] <= distance) lo = mid; else hi = mid; }
    return distance - ds[lo] <= ds[hi] - distance ? lo : hi;
  }

  function draw() {
    if (!data) return;
    const d = data.distances[nearest(Math.min(at(), data.max_distance))];
    const log = logBox.checked && data.max_distance > 1;
    const chart = $("sc-chart");
    const drawn = lineChart(chart, {
      width: widthOf(chart), height: 300, title: "score against distance",
      x: { domain: [log ? 1 : 0, data.max_distance], log, label: `relative distance d (seats${log ? ", log scale" : ""})` },
      y: { domain: extent([data.rope, data.sinusoidal, data.rope_compare]), label: "normalised score" },
      series: [
        { name: `RoPE (head_dim ${data.head_dim}, base ${fmt(data.base, 0)})`, xs: data.distances, ys: data.rope, color: COLORS.rope, width: 1.2 },
        { name: "RoPE, averaged over an octave of distances", xs: data.distances, ys: data.rope_trend, color: MARK_COLOURS.trend, width: 3.5 },
        { name: `RoPE, base ${fmt(data.compare_base, 0)}`, xs: data.distances, ys: data.rope_compare, color: MARK_COLOURS.focus, width: 1.5 },
        { name: `sinusoidal (d_model ${data.d_model}, base 10000)`, xs: data.distances, ys: data.sinusoidal, color: COLORS.sinusoidal, dash: "6 3" },
      ],
      hlines: [{ y: 0, color: "#999", dash: "2 3" }],
      vlines: d >= (log ? 1 : 0) ? [{ x: d, color: "#333", label: `d = ${d}` }] : [],
      onHover: (x) => { const v = data.distances[nearest(Math.max(0, Math.min(data.max_distance, x)))]; atInput.value = v; $("sc-at-out").textContent = v; readout(v); return v; },
    });
    // what the decay claim rests on, for readers and tests: the score at 0 and the mean over the far half
    const far = data.rope.filter((_, i) => data.distances[i] >= data.max_distance / 2);
    drawn.root.dataset.scoreAt0 = data.rope[0];
    drawn.root.dataset.farMean = far.reduce((a, b) => a + b, 0) / Math.max(1, far.length);
    drawn.root.dataset.trendEnd = data.rope_trend[data.rope_trend.length - 1];
    drawn.root.dataset.log = String(log);
    const alibiBox = $("sc-alibi");
    lineChart(alibiBox, {
      width: widthOf(alibiBox), height: 300, title: "ALiBi bias against distance",
      x: { domain: [0, data.max_distance], label: "relative distance d (seats)" },
      y: { domain: extent(data.alibi), label: "bias added to the logit" },
      series: data.alibi.map((row, h) => ({ name: `head ${h} (slope ${fmt(data.alibi_slopes[h], 4)})`, xs: data.distances,
        ys: row, color: headColour(h, data.heads) })),
      vlines: [{ x: d, color: "#333" }],
    });
    readout(d);
  }

  function readout(d) {
    const i = nearest(d);
    const sampled = data.distances.length < data.max_distance + 1
      ? ` <span class="muted">(${data.distances.length} sampled distances)</span>` : "";
    $("sc-readout").innerHTML = `At distance ${d}: RoPE ${valueSpan("sc-rope-at", data.rope[i], 6, ` data-d="${d}"`)}
      · RoPE base ${fmtInt(data.compare_base)} ${valueSpan("sc-rope2-at", data.rope_compare[i], 6)}
      · sinusoidal ${valueSpan("sc-sin-at", data.sinusoidal[i], 6)}
      · ALiBi head 0 ${valueSpan("sc-alibi-at", data.alibi[0][i], 4)}, head ${data.heads - 1}
      ${fmt(data.alibi[data.heads - 1][i], 4)}${sampled}`;
  }
  register("scores", { refresh, usesRope: true });
  onResize($("view-scores"), () => draw());
}
