// Stretching RoPE: what each scaling does to every pair's wavelength.

import { $, choice, figureHtml, figures, lessonManifest, menuHtml, proseHtml, showError, sliderHtml } from "../../core.js";
import { lineChart, html, fmt, widthOf, rad, stackLabels } from "../../charts.js";
import { NEUTRAL_COLOURS, REFERENCE_DASHES, SCALING_COLOURS, SCALING_DASHES, SCALING_LABELS } from "../../palette.js";

// The chapter's article under its kicker and heading (the page writes those from the manifest): its
// figures, controls and error box, and the data-prose places its text fills (posenc.teaching.lesson.chapters).
export const markup = [
  proseHtml("intro"),
  `<div class="prose" data-prose="definition" data-prose-class="definition"></div>`,
  `<ul data-prose="scalings"></ul>`,
  figureHtml("stretch-rope", {
    controls: [
      sliderHtml("factor", "str-factor", { scaling: "factor", primary: true, shows: 8 }),
      menuHtml("trained on", "str-train", [["2048", "2,048"], ["4096", "4,096"], ["8192", "8,192"], ["32768", "32,768"]],
        { selected: "8192" }),
    ],
    error: true, body: `<div id="str-chart" class="fig-box"></div>`,
    after: `<div class="table-wrap"><table class="data" id="str-table"></table></div>`,
  }),
  proseHtml("after", "measured"),
  `<div data-prose="configs-heading"></div>`,
  proseHtml("configs"),
  `<div class="inline-checks" data-checks="linear-vs-ntk llama3-bands"></div>`,
  `<div data-prose="see-also"></div>`,
].join("\n");

export function setup() {
  // each method in its scaling's one colour, dash and label (plain RoPE is the registry's "default"), as in the workbench
  const scalingOf = { rope: "default", linear: "linear", ntk: "ntk", yarn: "yarn" };
  const names = Object.fromEntries(Object.entries(scalingOf).map(([m, s]) => [m, SCALING_LABELS[s]]));
  const draw = (data) => {
    const xs = data.methods[0].wavelengths.map((_, i) => i);
    const all = data.methods.flatMap((m) => m.wavelengths).concat([data.target_len]);
    lineChart($("str-chart"), {
      width: widthOf($("str-chart")), height: 280, title: "wavelength of each pair",
      x: { domain: [0, xs.length - 1], label: "pair i (fast → slow)" },
      y: { domain: [Math.min(...all) / 1.5, Math.max(...all) * 1.5], log: true, label: "wavelength (seats)" },
      series: data.methods.map((m) => ({ name: names[m.method], key: scalingOf[m.method], xs, ys: m.wavelengths,
        color: SCALING_COLOURS[scalingOf[m.method]], dash: SCALING_DASHES[scalingOf[m.method]] })),
      hlines: [{ y: data.train_len, label: `trained ${data.train_len}`, color: NEUTRAL_COLOURS.reference,
        dash: REFERENCE_DASHES.trained, left: true },
        { y: data.target_len, label: `stretched ${data.target_len}`, color: NEUTRAL_COLOURS.reference, dash: REFERENCE_DASHES.stretched,
          left: true }],
    });
  };
  const fill = (data) => {
    const table = $("str-table");
    table.replaceChildren();
    html("caption", {}, table, `Stretching ${data.train_len} to ${data.target_len} tokens (factor ${fmt(data.factor, 0)}): `
      + `${data.partial_turn_pairs} of ${data.pairs} pairs turned less than once in training`);
    const head = html("tr", {}, html("thead", {}, table));
    for (const h of ["method", "fastest θ (rad/seat)", "attention factor", `pairs past training at ${data.target_len}`]) {
      html("th", { scope: "col" }, head, h);
    }
    const body = html("tbody", {}, table);
    for (const m of data.methods) {
      const tr = html("tr", { "data-method": m.method, "data-past": m.pairs_past_training }, body);
      html("th", { scope: "row" }, tr, names[m.method]);
      html("td", { class: "num" }, tr, fmt(m.fastest_theta, 4));
      html("td", { class: "num" }, tr, fmt(m.attention_factor, 4));
      const none = m.pairs_past_training === 0;
      html("td", { class: `num ${none ? "pass" : "fail"}` }, tr,
        none ? "✓ none: every angle was seen in training" : `✗ ${m.pairs_past_training} of ${data.pairs} meet angles never seen`);
    }
    stackLabels(table);
  };
  const { units: [unit], redraw } = figures("stretching-rope", {
    route: "/api/lesson/stretch", controls: { factor: "str-factor", train_len: choice("str-train") },
    params: (v) => ({ ...v, head_dim: 128 }), draw, fill, start: false,
  });
  // The figure opens on the setup the chapter's text measures: the defaults of its ranges (one source).
  lessonManifest().then(({ limits }) => {
    $("str-train").value = String(limits.train_len.default);
    $("str-factor").value = String(limits.factor.default);
    $("str-factor").dispatchEvent(new Event("input"));
    unit.load(0);
  }).catch((err) => showError("stretching-rope", err.message));
  return redraw;
}
