// View 5 of the explorer: ALiBi vs RoPE.

import { bars, cellAt, colourScale, fmt, heatmap, minus, pow2Label, signScale, widthOf } from "../charts.js";
import { divergingRGB as diverging, sequential } from "../palette.js";
import { $, rope, api, loader, slider, valueSpan, register } from "../core.js";
import { headColour, heatAxes, onResize } from "./workbench.js";

// "2⁻⁸" for whole powers of two; "2^−8.5" for the in-between slopes of a head count that is not a
// power of two (their decimals, "0.00276", did not fit the margin and were cut to "00276").
function slopeLabel(v) {
  const e = Math.log2(v);
  if (Math.abs(e - Math.round(e)) < 1e-9) return pow2Label(v);
  return `2^${minus(String(Number(e.toFixed(1))))}`;
}

export function setupAlibi() {
  // `picked`: the cell last hovered or tapped on each matrix, re-read after every change of settings
  const st = { data: null, biasSize: 1, ropeSize: 1, picked: {} };
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
    heatAxes($("al-bias"), d.matrix_len, d.matrix_len, { rowLabel: "query", colLabel: "key" });
    heatAxes($("al-rope"), d.matrix_len, d.matrix_len, { rowLabel: "query", colLabel: "key" });
    colourScale($("al-bias-scale"), sequential, { lo: 0, hi: low, label: "bias", width: widthOf($("al-bias-scale")),
      format: (v) => fmt(v, 2) });
    signScale($("al-rope-scale"), { span: top, label: "score", width: widthOf($("al-rope-scale")),
      format: (v) => fmt(v, 2) });
    $("al-head-label").textContent = d.head;
    $("al-slope").innerHTML = `${valueSpan("al-slope-value", d.slopes[d.head], 6)} = 2<sup>${fmt(d.slopes_log2[d.head], 2)}</sup>`;
    // The log axis starts one step (the ratio of the two smallest slopes) below the smallest slope,
    // so the smallest slope still gets a bar of one step's height.
    const sorted = [...d.slopes].sort((a, b) => a - b);
    const step = sorted.length > 1 && sorted[1] > sorted[0] ? sorted[1] / sorted[0] : 2;
    bars($("al-slopes"), d.slopes, { width: widthOf($("al-slopes")), height: 200, log: true, highlight: d.head,
      label: "ALiBi slopes", domain: [sorted[0] / step, sorted[sorted.length - 1]], tickFormat: slopeLabel, left: 58,
      colour: (v, i) => headColour(i, d.heads) });
    for (const name of Object.keys(st.picked)) show(name);
  });

  const MATRICES = {
    bias: { canvas: "al-bias", out: "al-bias-hover", size: "biasSize", what: "bias" },
    rope_scores: { canvas: "al-rope", out: "al-rope-hover", size: "ropeSize", what: "score" },
  };

  // Writes the readout of the picked cell from the current data (a cell the new size removed is
  // pulled to the nearest one that remains), so it never shows an old head's numbers.
  function show(name) {
    const spec = MATRICES[name], m = st.data[name], cell = st.picked[name];
    const row = Math.min(cell.row, m.length - 1), col = Math.min(cell.col, m.length - 1);
    const v = m[row][col];
    const out = $(spec.out);
    out.textContent = `${name === "bias" ? `head ${st.data.head}, ` : ""}query ${row}, key ${col} (distance ${row - col}): `
      + (v === null ? "masked (future key)" : `${spec.what} ${fmt(v, 5)}`);
    out.dataset.row = row;
    out.dataset.col = col;
    out.dataset.head = st.data.head;
    out.dataset.value = v === null ? "masked" : v;
  }

  for (const [name, spec] of Object.entries(MATRICES)) {
    const canvas = $(spec.canvas);
    const pick = (event) => {
      if (!st.data) return;
      const { row, col } = cellAt(canvas, event, st[spec.size]);
      const n = st.data[name].length;
      if (row < 0 || col < 0 || row >= n || col >= n) return;
      st.picked[name] = { row, col };
      show(name);
    };
    canvas.addEventListener("mousemove", pick);
    canvas.addEventListener("click", pick);                      // a tap, where there is no hover
  }
  register("alibi", { refresh, usesRope: true });
  onResize($("view-alibi"), () => refresh(0));
}
