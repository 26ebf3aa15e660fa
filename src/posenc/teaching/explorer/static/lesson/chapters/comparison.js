// The methods side by side: the table is the chapter's text (posenc.teaching.lesson.chapters.comparison: one row
// per scheme, in the order the API lists them); this script appends its live column: whether each scheme
// places the chosen length without an error, and what of it a model trained on 512 tokens never met.

import { $, errorHtml, figures, proseHtml, sliderHtml } from "../../core.js";
import { fmtInt, html, numbers } from "../../charts.js";

// The chapter's article under its kicker and heading (the page writes those from the manifest): its
// figures, controls and error box, and the data-prose places its text fills (posenc.teaching.lesson.chapters).
export const markup = [
  proseHtml("intro"),
  `<div class="controls">`,
  sliderHtml("tokens to read", "cmp-len", { min: 64, max: 4096, step: 64, value: 1024, primary: true }),
  `</div>`,
  errorHtml,
  `<div data-prose="table" data-prose-class="compare-table"></div>`,
  `<div class="numbers" id="cmp-numbers" aria-live="polite"></div>`,
  proseHtml("after"),
].join("\n");

export function setup() {
  const table = document.querySelector("#cmp-table table");
  const head = html("th", { scope: "col" }, table.tHead.rows[0]);
  head.append("at ", html("span", { id: "cmp-len-head" }), " tokens (trained on ", html("span", { id: "cmp-trained-head" }), ")");
  const rows = [...table.tBodies[0].rows];
  const cells = rows.map((tr) => html("td", { class: "live-reads", "data-label": "at the chosen length" }, tr));
  const check = (d) => {
    if (d.schemes.length !== rows.length) throw new Error(`comparison: ${d.schemes.length} schemes for ${rows.length} rows`);
  };
  const fill = (d) => {
    $("cmp-len-head").textContent = String(d.length);
    $("cmp-trained-head").textContent = String(d.trained_len);
    const shade = { trained: "pass", untrained: "warn", refused: "fail" };
    d.schemes.forEach((row, i) => {
      rows[i].dataset.scheme = row.scheme;
      cells[i].className = `live-reads ${shade[row.status]}`;
      cells[i].dataset.status = row.status;
      cells[i].textContent = row.says;
    });
    numbers($("cmp-numbers"), d.schemes.map((r) => `${r.scheme} (acts on ${r.where}): ${fmtInt(r.extra_parameters)} extra trainable ` +
      `numbers at width ${d.d_model}; ${d.length} tokens: ${r.says}`));
  };
  return figures("comparison", { route: "/api/lesson/compare", controls: { length: "cmp-len" }, prepare: check, fill }).redraw;
}
