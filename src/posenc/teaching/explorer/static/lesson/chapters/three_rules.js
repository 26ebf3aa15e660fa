// The three rules, checked live for every code.

import { $, choice, figureHtml, figures, menuHtml, proseHtml, sliderHtml } from "../../core.js";
import { html, fmt, numbers, stackLabels } from "../../charts.js";

// The chapter's article under its kicker and heading (the page writes those from the manifest): its
// figures, controls and error box, and the data-prose places its text fills (posenc.teaching.lesson.chapters).
export const markup = [
  proseHtml("intro"),
  `<ol class="rules" data-prose="rules"></ol>`,
  figureHtml("rules", {
    controls: [sliderHtml("sentence length", "rules-len", { min: 5, max: 2048, value: 512, primary: true }),
      menuHtml("width", "rules-width", ["16", "64", "256"], { selected: "64" })],
    error: true, body: `<div class="table-wrap"><table class="data rules-table" id="rules-table"></table></div>`,
  }),
  proseHtml("after", "measured"),
  `<div data-prose="see-also"></div>`,
].join("\n");

export function setup() {
  return figures("three-rules", {
    route: "/api/lesson/rules",
    controls: { length: "rules-len", d_model: choice("rules-width") },
    fill: (d) => {
      const table = $("rules-table");
      table.replaceChildren();
      html("caption", {}, table, `The three rules on a ${d.length}-word sentence, codes ${d.d_model} numbers wide`);
      const head = html("tr", {}, html("thead", {}, table));
      for (const h of ["code", "1 · bounded (largest |value|)", "2 · same step (seat 2→3: 5 words / this sentence)",
        "3 · unique (closest two seats)"]) html("th", { scope: "col" }, head, h);
      const body = html("tbody", {}, table);
      const mark = (ok) => (ok ? "✓ passes" : "✗ fails");
      for (const row of d.codes) {
        const tr = html("tr", { "data-code": row.code }, body);
        html("th", { scope: "row" }, tr, row.code);
        html("td", { class: row.bounded ? "pass" : "fail" }, tr, `${mark(row.bounded)}: ${fmt(row.largest, 4)}`);
        html("td", { class: row.consistent ? "pass" : "fail" }, tr,
          `${mark(row.consistent)}: ${fmt(row.step_5_words, 4)} / ${fmt(row.step_this_sentence, 4)}`);
        html("td", { class: row.unique ? "pass" : "fail" }, tr, `${mark(row.unique)}: ${fmt(row.closest_pair, 4)}`);
      }
      stackLabels(table);
    },
  }).redraw;
}
