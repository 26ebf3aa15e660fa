// View 6 of the explorer: precision.

import { fmtInt, lineChart, widthOf } from "../charts.js";
import { $, rope, focus, api, loader, slider, pow2, valueSpan, register } from "../core.js";
import { onResize } from "./workbench.js";
import { DTYPE_COLOURS, MARK_COLOURS } from "../palette.js";

export function setupPrecision() {
  const maxPos = slider("pr-max-log", () => refresh(), pow2, fmtInt);
  const pos = slider("pr-pos-log", () => refresh(), (v) => Math.min(2 ** 31, Math.round(10 ** v)), fmtInt);
  // An error of exactly 0 has no place on a log axis: it is drawn on the axis's bottom row, labelled
  // "exact (0)", two decades below the smallest error that is not 0 (and at most 1e-12).
  const zeroRow = (d) => {
    const errors = [...Object.values(d.max_error), ...Object.values(d.at_pos)].flat().filter((v) => v !== null && v > 0);
    return 10 ** (Math.floor(Math.log10(Math.min(1e-10, ...errors))) - 2);
  };

  const refresh = loader("precision", async (signal) => {
    const d = await api("/api/precision", { head_dim: rope.headDim, base: rope.base, max_position: maxPos(),
      pos: pos() }, signal);
    const zero = zeroRow(d);
    const names = ["bfloat16", "float16", "float32", "posenc"];
    const label = { bfloat16: "bfloat16 (pos·θ in bf16)", float16: "float16 (pos·θ in fp16)",
      float32: "float32 (pos·θ in fp32)", posenc: "posenc float32 tables" };
    lineChart($("pr-chart"), {
      width: widthOf($("pr-chart")), height: 320, title: "angle error against position",
      x: { domain: [1, d.max_position], log: true, label: "position (log)" },
      y: { domain: [zero, 10], log: true, zero, label: "worst angle error (rad)" },
      series: names.map((n) => ({ name: label[n], key: n, xs: d.positions, ys: d.max_error[n], color: DTYPE_COLOURS[n],
        width: n === "posenc" ? 3 : 2 })),
      vlines: d.pos <= d.max_position && d.pos >= 1 ? [{ x: d.pos, color: "#333", label: `pos ${fmtInt(d.pos)}` }] : [],
    });
    const pairs = d.theta.map((_, i) => i);
    lineChart($("pr-pairs"), {
      width: widthOf($("pr-pairs")), height: 320, title: "angle error per pair",
      x: { domain: [0, Math.max(1, pairs.length - 1)], label: "rotation pair i (fast → slow)" },
      y: { domain: [zero, 10], log: true, zero, label: `angle error at ${fmtInt(d.pos)} (rad)` },
      series: names.map((n) => ({ name: label[n], key: n, xs: pairs, ys: d.at_pos[n], color: DTYPE_COLOURS[n], points: true })),
      vlines: focus.pair !== null && focus.pair < pairs.length ? [{ x: focus.pair, color: MARK_COLOURS.focus, label: `pair ${focus.pair}` }] : [],
      legend: false,
    });
    const worst = (n) => { const v = d.at_pos[n]; return v.some((x) => x === null) ? null : Math.max(...v); };
    // the error depends on the head (its width and base: the RoPE settings), so the readout names it
    $("pr-readout").innerHTML = `At position ${fmtInt(d.pos)}, worst of the ${d.theta.length} pairs of a `
      + `<span id="pr-head">${d.head_dim}-wide head with base ${fmtInt(d.base)}</span>: bfloat16 ${valueSpan("pr-bf16", worst("bfloat16"), 4)} rad
      · float16 ${worst("float16") === null ? '<span id="pr-fp16" class="num" data-value="overflow">overflow (past 65504)</span>' : valueSpan("pr-fp16", worst("float16"), 4)}
      · float32 ${valueSpan("pr-fp32", worst("float32"), 4)} rad · posenc ${valueSpan("pr-posenc", worst("posenc"), 2)} rad`;
  });
  register("precision", { refresh, usesRope: true });
  onResize($("view-precision"), () => refresh(0));
}
