// Word + position = input: the word vector, the position vector and their sum.

import { $, choice, figureHtml, figures, inputHtml, menuHtml, proseHtml, sliderHtml, typed } from "../../core.js";
import { fmt, widthOf, root, barRow, signKey, numbers } from "../../charts.js";

// The chapter's article under its kicker and heading (the page writes those from the manifest): its
// figures, controls and error box, and the data-prose places its text fills (posenc.teaching.lesson.chapters).
export const markup = [
  proseHtml("intro"),
  figureHtml("input", {
    controls: [
      inputHtml("word", { type: "text", id: "input-word", value: "dog", maxlength: 32, size: 8 }),
      sliderHtml("seat", "input-seat", { min: 0, max: 63, value: 3, primary: true }),
      menuHtml("width", "input-width", ["8", "16", "32"], { selected: "16" }),
      menuHtml("word vector scale", "input-std", [["1", "N(0, 1): nn.Embedding's default"],
        ["0.02", "N(0, 0.02²): GPT-2 / BERT initialisation"], ["sqrt", "0.02 × √d: the 2017 Transformer scales the word up"]],
      { selected: "1" }),
    ],
    error: true, body: `<div id="input-figure" class="fig-box"></div>\n<div id="input-legend"></div>`, numbers: true,
  }),
  proseHtml("after"),
  `<div class="inline-checks" data-checks="added"></div>`,
].join("\n");

export function setup() {
  const stdOf = () => {
    const v = $("input-std").value, width = Number($("input-width").value);
    return v === "sqrt" ? 0.02 * Math.sqrt(width) : Number(v);
  };
  const draw = (data) => {
    const holder = $("input-figure"), width = widthOf(holder), rowH = 64, gap = 30;
    const s = root(holder, width, 3 * (rowH + gap) + 4, `word vector plus position vector equals input, ${data.d_model} numbers each`);
    const span = Math.max(...[...data.word_vector, ...data.position_vector, ...data.input].map(Math.abs));
    const rows = [[data.word_vector, `word “${data.word}” (${data.d_model} numbers, length ${fmt(data.word_norm, 2)})`, "word"],
      [data.position_vector, `+ position of seat ${data.seat} (${data.d_model} numbers, length ${fmt(data.position_norm, 2)})`, "position"],
      [data.input, `= input to the first layer (${data.d_model} numbers)`, "input"]];
    rows.forEach(([values, label, row], k) => barRow(s, values, { x: 0, y: 18 + k * (rowH + gap), width, height: rowH, span, label, row }));
    // the bars' colour is their sign alone (their height is their size, on one scale of ±span for the
    // three rows), so the legend is the two sign colours, not a colour scale
    signKey($("input-legend"), { negative: `below zero (bar height: the size, up to ${fmt(span, 2)})`,
      positive: "above zero" });
  };
  const fill = (data) => {
    const show = (v) => `[${v.map((x) => fmt(x, 2)).join(", ")}]`;
    numbers($("input-numbers"), [
      `word “${data.word}”, entries drawn with standard deviation ${fmt(data.embed_std, 4)}: ${show(data.word_vector)}`,
      `position of seat ${data.seat}: ${show(data.position_vector)}`,
      `input = word + position: ${show(data.input)}`,
      `lengths: word ${fmt(data.word_norm, 3)}, position ${fmt(data.position_norm, 3)} (always √(d/2)); position / word = ${fmt(data.ratio, 2)}`,
      `direction of the input against the word alone (cosine): ${fmt(data.cosine_input_word, 3)}`,
    ]);
  };
  return figures("word-plus-position", {
    route: "/api/lesson/input",
    controls: { word: typed("input-word", (node) => node.value.trim() || "dog"), seat: "input-seat",
      d_model: choice("input-width"), embed_std: choice("input-std", () => Number(stdOf().toPrecision(6))) },
    draw, fill,
  }).redraw;
}
