// Common mistakes, each measured.

import { $, api, errorHtml, figureHtml, figures, proseHtml, sliderHtml } from "../../core.js";
import { fmt, fmtInt, numbers, hbars } from "../../charts.js";
import { CATEGORY_COLOURS } from "../../palette.js";

// The chapter's article under its kicker and heading (the page writes those from the manifest): its
// figures, controls and error box, and the data-prose places its text fills (posenc.teaching.lesson.chapters).
export const markup = [
  proseHtml("intro"),
  errorHtml,
  proseHtml("m1"),
  figureHtml("mis-param", {
    controls: [sliderHtml("optimizer steps", "mis-steps", { min: 1, max: 10, value: 1, primary: true })],
    body: `<div id="mis-param" class="fig-box"></div>`, numbers: true,
  }),
  proseHtml("m1-measured", "m2"),
  figureHtml("mis-cat", {
    controls: [sliderHtml("width d", "mis-width", { min: 64, max: 2048, step: 64, value: 512 })],
    body: `<div id="mis-cat" class="fig-box"></div>`, numbers: true,
  }),
  proseHtml("m2-measured", "m3"),
  figureHtml("mis-v", {
    controls: [sliderHtml("move the phrase by", "mis-shift", { min: 1, max: 1000, value: 100 })],
    body: `<div id="mis-v" class="fig-box"></div>`, numbers: true,
  }),
  proseHtml("m3-measured", "after"),
].join("\n");

export function setup() {
  // the drift axis ends where the slider's last step takes the parameter table, so moving the slider
  // grows the bar on one axis (it once rescaled to each drift and froze at full width)
  let driftAxis = null;
  return figures("common-mistakes", {
    controls: { steps: "mis-steps", d_model: "mis-width", shift: "mis-shift" },
    request: async (values, signal) => {
      const most = Number($("mis-steps").max);
      if (!driftAxis || driftAxis.steps !== most) {
        const end = await api("/api/lesson/mistakes", { ...values, steps: most }, signal);
        driftAxis = { steps: most, drift: end.parameter.parameter.largest_change };
      }
      return api("/api/lesson/mistakes", values, signal);
    },
    draw: (data) => {
      const p = data.parameter;
      hbars($("mis-param"), [
        { label: "buffer (right)", value: p.buffer.largest_change, color: CATEGORY_COLOURS.right },
        { label: "nn.Parameter (wrong)", value: p.parameter.largest_change, color: CATEGORY_COLOURS.wrong },
      ], { label: "largest change of the table", axis: `largest change of a table value (axis: up to ${driftAxis.steps} steps)`,
        format: (v) => fmt(v, 4), max: Math.max(driftAxis.drift, p.parameter.largest_change) });
      hbars($("mis-cat"), [
        { label: `added (width ${data.concat.d_model})`, value: data.concat.added, color: CATEGORY_COLOURS.right },
        { label: `glued (width ${2 * data.concat.d_model})`, value: data.concat.concatenated, color: CATEGORY_COLOURS.wrong },
      ], { label: "parameters of one block", axis: "parameters of one block", format: (v) => fmtInt(v) });
      hbars($("mis-v"), [
        { label: "q, k turned (right)", value: data.values.qk_only, rounding: data.values.qk_only_rounding, color: CATEGORY_COLOURS.right },
        { label: "v turned too (wrong)", value: data.values.with_v, rounding: data.values.with_v_rounding, color: CATEGORY_COLOURS.wrong },
      ], { label: "change of the last output when the phrase moves", axis: "change of the last output", format: (v) => fmt(v, 3) });
    },
    fill: (data) => {
      const p = data.parameter;
      numbers($("mis-param-numbers"), [
        `after ${data.steps} Adam step(s): the buffer table moved ${fmt(p.buffer.largest_change, 4)} (trainable numbers ${fmtInt(p.buffer.trainable)})`,
        `the parameter table moved ${fmt(p.parameter.largest_change, 4)} (trainable numbers ${fmtInt(p.parameter.trainable)})`,
      ]);
      numbers($("mis-cat-numbers"), [
        `one block at width ${data.concat.d_model}: ${fmtInt(data.concat.added)} parameters; at ${2 * data.concat.d_model}: ` +
          `${fmtInt(data.concat.concatenated)} (${fmt(data.concat.ratio, 2)} times as many)`,
      ]);
      numbers($("mis-v-numbers"), [
        `phrase of ${data.values.seq} tokens moved by ${data.values.shift}: the last output changes by ${fmt(data.values.qk_only, 2)} ` +
          `with q, k turned, and by ${fmt(data.values.with_v, 4)} with v turned too`,
      ]);
    },
  }).redraw;
}
