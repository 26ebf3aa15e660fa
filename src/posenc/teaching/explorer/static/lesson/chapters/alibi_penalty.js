// ALiBi, a penalty for distance: the bias of every head against how far back a key sits,
// and the attention the bias alone leaves to each key, both from posenc's alibi_slopes/alibi_bias.

import { $, choice, figureHtml, figures, menuHtml, proseHtml, sliderHtml } from "../../core.js";
import { lineChart, html, fmt, widthOf, numbers, stackLabels } from "../../charts.js";
import { headColour } from "../../palette.js";

// The chapter's article under its kicker and heading (the page writes those from the manifest): its
// figures, controls and error box, and the data-prose places its text fills (posenc.teaching.lesson.chapters).
export const markup = [
  proseHtml("intro"),
  figureHtml("alibi", {
    controls: [sliderHtml("the query looks back", "alibi-distance", { min: 2, max: 64, value: 10, primary: true, unit: "seats" }),
      menuHtml("heads", "alibi-heads", ["4", "8", "16"], { selected: "8" })],
    error: true, body: `<div id="alibi-chart" class="fig-box"></div>\n<div id="alibi-weights" class="fig-box"></div>`,
    after: `<div class="table-wrap"><table class="data" id="alibi-table"></table></div>`, numbers: true,
  }),
  proseHtml("after"),
  `<div class="inline-checks" data-checks="alibi-head0"></div>`,
  `<div data-prose="see-also"></div>`,
].join("\n");

// Heads coloured as in the workbench's ALiBi view (palette.headColour), dashes alternating.

export function setup() {
  const draw = (data) => {
    const xs = data.keys_back, last = data.rows.length - 1;
    const lowest = Math.min(...data.rows[0].bias);
    lineChart($("alibi-chart"), {
      width: widthOf($("alibi-chart")), height: 260, title: `ALiBi bias of ${data.heads} heads against distance`,
      x: { domain: [0, data.distance], label: "seats the key sits behind the query (i − j)" },
      y: { domain: [lowest * 1.05, 0], label: "bias added to the score" },
      series: data.rows.map((r) => ({ name: `head ${r.head}: slope ${r.slope_text}`, xs, ys: r.bias,
        color: headColour(r.head, data.heads), dash: r.head % 2 ? "6 3" : null })),
    });
    const shown = [data.rows[0], data.rows[last]];
    lineChart($("alibi-weights"), {
      width: widthOf($("alibi-weights")), height: 220,
      title: `attention weights from the bias alone, head 0 and head ${last}`,
      x: { domain: [0, data.distance], label: "seats the key sits behind the query (i − j)" },
      y: { domain: [0, Math.max(...shown.flatMap((r) => r.weights)) * 1.1], label: "attention weight" },
      series: shown.map((r) => ({ name: `head ${r.head} (slope ${r.slope_text})`, xs, ys: r.weights,
        color: headColour(r.head, data.heads), points: data.distance <= 32 })),
    });
  };
  // keys_back runs from the farthest key to the nearest; the charts read left to right from near to far
  const prepare = (data) => {
    const order = data.keys_back.map((_, i) => i).reverse();
    data.keys_back = order.map((i) => data.keys_back[i]);
    for (const r of data.rows) { r.bias = order.map((i) => r.bias[i]); r.weights = order.map((i) => r.weights[i]); }
  };
  const fill = (data) => {
    const table = $("alibi-table");
    table.replaceChildren();
    html("caption", {}, table, `${data.heads} heads, the query ${data.distance} seats after the first key`);
    const head = html("tr", {}, html("thead", {}, table));
    for (const h of ["head", "slope", `bias ${data.distance} seats back`, "weight on the nearest key", "weight on the farthest key"]) {
      html("th", { scope: "col" }, head, h);
    }
    const body = html("tbody", {}, table);
    for (const r of data.rows) {
      const tr = html("tr", { "data-head": r.head }, body);
      html("th", { scope: "row" }, tr, String(r.head));
      html("td", { class: "num" }, tr, r.slope_text);
      html("td", { class: "num bias" }, tr, fmt(r.bias_at_distance, 4));
      html("td", { class: "num" }, tr, fmt(r.weight_nearest, 3));
      html("td", { class: "num" }, tr, fmt(r.weight_farthest, 3));
    }
    stackLabels(table);
    numbers($("alibi-numbers"), [
      `slopes: ${data.rows.map((r) => r.slope_text).join(", ")}`,
      `head 0 adds ${fmt(data.rows[0].bias_at_distance, 4)} to a key ${data.distance} seats back; head ${data.rows.length - 1} adds `
        + `${fmt(data.rows[data.rows.length - 1].bias_at_distance, 4)}`,
    ]);
  };
  return figures("alibi-penalty", {
    route: "/api/lesson/alibi", controls: { heads: choice("alibi-heads"), distance: "alibi-distance" }, prepare, draw, fill,
  }).redraw;
}
