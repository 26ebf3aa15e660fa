// View 3 of the explorer: score vs distance.

import { extent, fmt, fmtInt, lineChart } from "../charts.js";
import { $, COLORS, PALETTE, rope, api, loader, slider, pow10, valueSpan, register } from "../core.js";

export function setupScores() {
  let data = null;
  const maxD = slider("sc-max", (v) => { $("sc-at").max = v; refresh(); });
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
    lineChart($("sc-chart"), {
      width: 600, height: 300, title: "score against distance",
      x: { domain: [0, data.max_distance], label: "relative distance d (seats)" },
      y: { domain: extent([data.rope, data.sinusoidal, data.rope_compare]), label: "normalised score" },
      series: [
        { name: `RoPE (head_dim ${data.head_dim}, base ${fmt(data.base, 0)})`, xs: data.distances, ys: data.rope, color: COLORS.rope },
        { name: `RoPE, base ${fmt(data.compare_base, 0)}`, xs: data.distances, ys: data.rope_compare, color: "#6a51a3", width: 1.5 },
        { name: `sinusoidal (d_model ${data.d_model}, base 10000)`, xs: data.distances, ys: data.sinusoidal, color: COLORS.sinusoidal, dash: "6 3" },
      ],
      hlines: [{ y: 0, color: "#999", dash: "2 3" }],
      vlines: [{ x: d, color: "#333", label: `d = ${d}` }],
      onHover: (x) => { const v = data.distances[nearest(Math.max(0, Math.min(data.max_distance, x)))]; $("sc-at").value = v; $("sc-at-out").textContent = v; readout(v); return v; },
    });
    lineChart($("sc-alibi"), {
      width: 600, height: 300, title: "ALiBi bias against distance",
      x: { domain: [0, data.max_distance], label: "relative distance d (seats)" },
      y: { domain: extent(data.alibi), label: "bias added to the logit" },
      series: data.alibi.map((row, h) => ({ name: `head ${h} (slope ${fmt(data.alibi_slopes[h], 4)})`, xs: data.distances,
        ys: row, color: PALETTE[h % PALETTE.length] })),
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
  register("scores", refresh);
}
