// Learned tables and the 512 wall.

import { $, figureHtml, figures, proseHtml, sliderHtml } from "../../core.js";
import { lineChart, svg, html, fmt, widthOf, root, text, numbers } from "../../charts.js";
import { CATEGORY_COLOURS, SCHEME_COLOURS, INK, textColour } from "../../palette.js";
import { appendBreakable } from "../prose.js";

// The chapter's article under its kicker and heading (the page writes those from the manifest): its
// figures, controls and error box, and the data-prose places its text fills (posenc.teaching.lesson.chapters).
export const markup = [
  proseHtml("intro"),
  figureHtml("wall", {
    controls: [sliderHtml("tokens", "wall-tokens", { min: 1, max: 1024, value: 513, primary: true })],
    error: true, body: `<div id="wall-figure" class="fig-box"></div>\n<div id="wall-result" class="result-box" role="status"></div>`,
  }),
  figureHtml("stretch", {
    controls: [sliderHtml("stretch the table to", "wall-stretch", { min: 513, max: 4096, value: 1024 })],
    body: `<div id="stretch-figure" class="fig-box"></div>`, numbers: "wall-numbers",
  }),
  proseHtml("after", "measured"),
  `<div class="inline-checks" data-checks="learned-limit"></div>`,
].join("\n");

// "1 token", "513 tokens"
const count = (tokens) => `${tokens} token${tokens === 1 ? "" : "s"}`;

export function setup() {
  const draw = (data) => {
    const holder = $("wall-figure"), width = widthOf(holder), s = root(holder, width, 96,
      `a ${data.max_len}-row table and ${data.tokens} requested seats`);
    const top = Math.max(1024, data.tokens), x = (v) => 8 + (v / top) * (width - 16);
    svg("rect", { x: x(0), y: 20, width: x(data.max_len) - x(0), height: 26, fill: SCHEME_COLOURS.learned, "fill-opacity": 0.3,
      stroke: SCHEME_COLOURS.learned, class: "table-rows" }, s);
    text(s, x(0) + 4, 38, `rows 0 … ${data.max_len - 1}`, { size: 12 });
    svg("line", { x1: x(data.max_len), x2: x(data.max_len), y1: 10, y2: 58, stroke: INK, "stroke-width": 3 }, s);
    text(s, x(data.max_len), 72, `the wall: ${data.max_len}`, { size: 12, anchor: x(data.max_len) > width - 90 ? "end" : "middle", weight: 700 });
    const over = data.tokens > data.max_len;
    svg("rect", { x: x(0), y: 50, width: Math.max(2, x(data.tokens) - x(0)), height: 8,
      fill: over ? CATEGORY_COLOURS.wrong : CATEGORY_COLOURS.right, class: "request" }, s);
    text(s, Math.min(width - 4, x(data.tokens)), 90, `${count(data.tokens)} asked for`, { size: 12,
      anchor: x(data.tokens) > width / 2 ? "end" : "start", color: textColour(over ? CATEGORY_COLOURS.wrong : CATEGORY_COLOURS.right), weight: 700 });
    lineChart($("stretch-figure"), {
      width: widthOf($("stretch-figure")), height: 230, title: "last rows of column 0, old and stretched",
      x: { domain: [data.old_positions[0], data.old_positions[data.old_positions.length - 1]], label: "seat of the original table" },
      y: { domain: [Math.min(...data.old_values, ...data.new_values) - 0.01, Math.max(...data.old_values, ...data.new_values) + 0.01],
        label: "column 0" },
      series: [
        { name: `original rows (${data.max_len})`, xs: data.old_positions, ys: data.old_values, color: INK, points: true },
        { name: `stretched rows (${data.stretch_to})`, xs: data.new_at_old_scale, ys: data.new_values, color: CATEGORY_COLOURS.stretched,
          dash: "2 4", points: true },
      ],
    });
  };
  const fill = (data) => {
    const result = $("wall-result");
    result.className = `result-box ${data.ok ? "ok" : "failed"}`;
    result.replaceChildren();
    if (data.ok) {
      html("p", {}, result, `${count(data.tokens)}: fine. The table answered with shape (${data.shape.join(", ")}).`);
    } else {
      html("p", { class: "verdict" }, result, `${count(data.tokens)}: posenc raised ${data.error_type}:`);
      appendBreakable(html("pre", { class: "error-message" }, result), data.error);
    }
    // the stretched table's answer to the same request, so that stretching shows in the status
    html("p", { class: `stretched-status ${data.stretched_reads_tokens ? "pass" : "fail"}`, id: "wall-stretched-status",
      "data-reads": String(data.stretched_reads_tokens) }, result, data.stretched_reads_tokens
      ? `Stretched to ${data.stretch_to} rows: the table reads all ${count(data.tokens)} (fine-tune before trusting the new rows).`
      : `Stretched to ${data.stretch_to} rows: still too short for ${count(data.tokens)}; stretch it further.`);
    numbers($("wall-numbers"), [
      `table of ${data.max_len} rows; ${count(data.tokens)} ${data.ok ? "read" : `stop at seat ${data.first_missing}`}`,
      `stretched to ${data.stretch_to} rows: new row j sits at old seat j × ${fmt(data.squeeze, 5)}; ` +
        `the stretched table ${data.stretched_reads_tokens ? "reads" : "still cannot read"} ${count(data.tokens)}`,
      `last trained rows, column 0: ${data.old_values.slice(-4).map((v) => fmt(v, 4)).join(", ")}`,
      `last stretched rows, column 0: ${data.new_values.slice(-4).map((v) => fmt(v, 4)).join(", ")}`,
    ]);
  };
  return figures("learned-tables", {
    route: "/api/lesson/learned", controls: { tokens: "wall-tokens", stretch_to: "wall-stretch" }, draw, fill,
  }).redraw;
}
