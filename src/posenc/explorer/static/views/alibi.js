// View 5 of the explorer: ALiBi vs RoPE.

import { bars, cellAt, colourScale, diverging, fmt, heatmap, pow2Label, sequential } from "../charts.js";
import { $, COLORS, rope, api, loader, slider, valueSpan, register } from "../core.js";

export function setupAlibi() {
  const st = { data: null, biasSize: 1, ropeSize: 1 };
  const heads = slider("al-heads", (v) => {
    const head = $("al-head");
    head.max = v - 1;
    if (Number(head.value) > v - 1) { head.value = v - 1; $("al-head-out").textContent = v - 1; }
    refresh();
  });
  const head = slider("al-head", () => refresh());
  const len = slider("al-len", () => refresh());
  const seed = slider("al-seed", () => refresh());

  const refresh = loader("alibi", async (signal) => {
    const d = await api("/api/alibi", { heads: heads(), head: Math.min(head(), heads() - 1), matrix_len: len(),
      head_dim: rope.headDim, base: rope.base, seed: seed() }, signal);
    st.data = d;
    const low = Math.min(...d.bias.flat().filter((v) => v !== null));
    st.biasSize = heatmap($("al-bias"), d.bias, (v) => sequential(low ? v / low : 0), { maxWidth: 300, maxHeight: 300 });
    const top = Math.max(...d.rope_scores.flat().filter((v) => v !== null).map(Math.abs)) || 1;
    st.ropeSize = heatmap($("al-rope"), d.rope_scores, (v) => diverging(v / top), { maxWidth: 300, maxHeight: 300 });
    colourScale($("al-bias-scale"), sequential, { lo: 0, hi: low, label: "bias", format: (v) => fmt(v, 2) });
    colourScale($("al-rope-scale"), diverging, { lo: -top, hi: top, t0: -1, t1: 1, label: "score",
      format: (v) => fmt(v, 2) });
    $("al-head-label").textContent = d.head;
    $("al-slope").innerHTML = `${valueSpan("al-slope-value", d.slopes[d.head], 6)} = 2<sup>${fmt(d.slopes_log2[d.head], 2)}</sup>`;
    // The log axis starts one step (the ratio of the two smallest slopes) below the smallest slope,
    // so the smallest slope still gets a bar of one step's height.
    const sorted = [...d.slopes].sort((a, b) => a - b);
    const step = sorted.length > 1 && sorted[1] > sorted[0] ? sorted[1] / sorted[0] : 2;
    bars($("al-slopes"), d.slopes, { width: 300, height: 200, log: true, highlight: d.head, label: "ALiBi slopes",
      domain: [sorted[0] / step, sorted[sorted.length - 1]], tickFormat: pow2Label, left: 40,
      colour: (v, i) => (i === d.head ? COLORS.k : "#4c78a8") });
  });

  function hover(canvasId, outId, key, sizeKey, what) {
    $(canvasId).addEventListener("mousemove", (event) => {
      if (!st.data) return;
      const { row, col } = cellAt($(canvasId), event, st[sizeKey]);
      const m = st.data[key];
      if (row < 0 || col < 0 || row >= m.length || col >= m.length) return;
      const v = m[row][col];
      $(outId).textContent = `query ${row}, key ${col} (distance ${row - col}): ${v === null ? "masked (future key)" : `${what} ${fmt(v, 5)}`}`;
    });
  }
  hover("al-bias", "al-bias-hover", "bias", "biasSize", "bias");
  hover("al-rope", "al-rope-hover", "rope_scores", "ropeSize", "score");
  register("alibi", refresh);
}
