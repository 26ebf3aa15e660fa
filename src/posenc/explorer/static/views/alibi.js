// View 5 of the explorer: ALiBi vs RoPE.

import { bars, cellAt, diverging, fmt, heatmap, sequential } from "../charts.js";
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
    $("al-head-label").textContent = d.head;
    $("al-slope").innerHTML = `${valueSpan("al-slope-value", d.slopes[d.head], 6)} = 2<sup>${fmt(d.slopes_log2[d.head], 2)}</sup>`;
    bars($("al-slopes"), d.slopes, { width: 300, height: 200, log: true, highlight: d.head, label: "ALiBi slopes",
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
