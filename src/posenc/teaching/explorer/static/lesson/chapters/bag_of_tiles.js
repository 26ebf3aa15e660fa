// A bag of tiles: each word's output from one attention block, as written and shuffled.

import { $, SCHEME_OPTIONS, choice, figureHtml, figures, inputHtml, menuHtml, proseHtml, typed } from "../../core.js";
import { svg, fmt, widthOf, root, text, signLegend, numbers } from "../../charts.js";
import { TILE_COLOURS, INK, MUTED, diverging } from "../../palette.js";

// The chapter's article under its kicker and heading (the page writes those from the manifest): its
// figures, controls and error box, and the data-prose places its text fills (posenc.teaching.lesson.chapters).
export const markup = [
  proseHtml("intro"),
  figureHtml("bag", {
    controls: [
      inputHtml("sentence", { type: "text", id: "bag-text", value: "the dog bit the man", maxlength: 300 }, { wide: true }),
      menuHtml("positions", "bag-scheme", SCHEME_OPTIONS, { selected: "nope" }),
      `<button type="button" id="bag-shuffle" class="primary" data-primary>Shuffle the tiles</button>`,
      `<button type="button" id="bag-swap">Swap “dog” and “man”</button>`,
    ],
    error: true, body: `<div id="bag-figure" class="fig-box"></div>`, numbers: true,
  }),
  proseHtml("after", "measured"),
  `<div class="inline-checks" data-checks="bag-of-words"></div>`,
].join("\n");

export function setup() {
  // The first shuffle is shown at once, so the two strips differ from the first look on.
  let shuffle = 1;
  const draw = (data) => {
    const holder = $("bag-figure"), width = widthOf(holder);
    const rowH = 72, tileW = Math.min(92, width * 0.26), legendH = 54;
    const height = 26 + data.words.length * rowH + legendH;
    const s = root(holder, width, height, `outputs of each word, as written and shuffled, and their difference, with ${data.scheme}`);
    text(s, 0, 14, `shuffled: ${data.shuffled.join(" ")}`, { size: 12, color: MUTED });
    const span = Math.max(...data.outputs.flat().map(Math.abs), 1e-9);
    // the difference gets a scale of its own, stated in its legend, so small changes still show
    const deltaSpan = Math.max(...data.delta.flat().map(Math.abs));
    const rounding = deltaSpan <= data.rounding_level;
    const stripX = tileW + 10, stripW = width - stripX - 70, cell = stripW / data.d_model;
    data.words.forEach((word, i) => {
      const y = 26 + i * rowH;
      svg("rect", { x: 0, y: y + 4, width: tileW, height: rowH - 14, rx: 6, fill: TILE_COLOURS.fill, stroke: TILE_COLOURS.stroke }, s);
      text(s, tileW / 2, y + rowH / 2 - 2, word, { size: 14, anchor: "middle", weight: 700 });
      text(s, tileW / 2, y + rowH / 2 + 13, `seat ${i} → ${data.order.indexOf(i)}`, { size: 11, anchor: "middle", color: MUTED });
      [data.outputs[i], data.outputs_shuffled[i]].forEach((row, k) => {
        row.forEach((v, j) => svg("rect", { x: stripX + j * cell, y: y + 4 + k * 18, width: Math.max(1, cell - 1), height: 16,
          fill: diverging(v, span), class: k ? "cell shuffled" : "cell written" }, s));
      });
      data.delta[i].forEach((v, j) => svg("rect", { x: stripX + j * cell, y: y + 42, width: Math.max(1, cell - 1), height: 12,
        fill: rounding ? "#ffffff" : diverging(v, deltaSpan), stroke: "#d5d9e0", "stroke-width": 0.5, class: "cell delta" }, s));
      const same = data.difference[i] <= data.rounding_level;
      text(s, width - 2, y + 26, same ? "same" : fmt(data.difference[i], 3), { size: 12, anchor: "end",
        color: same ? MUTED : INK, weight: 700 });
    });
    const ly = 26 + data.words.length * rowH + 4, lw = Math.min(150, (width - 24) / 2);
    signLegend(s, { x: 0, y: ly, width: lw, span, label: "outputs", format: (v) => fmt(v, 2) });
    signLegend(s, { x: lw + 24, y: ly, width: lw, span: rounding ? data.rounding_level : deltaSpan, label: "difference",
      format: (v) => fmt(v, 2) });
  };
  const fill = (data) => {
    numbers($("bag-numbers"), [
      `scheme: ${data.scheme}; sentence: “${data.words.join(" ")}”; shuffled: “${data.shuffled.join(" ")}”.`,
      ...data.words.map((w, i) => `“${w}” (seat ${i}): largest change of its output after the shuffle ${fmt(data.difference[i], 3)}`),
      `largest change over all words: ${fmt(data.largest_difference, 3)}${data.largest_difference < 1e-9 ? " (rounding: the same vectors)" : ""}`,
    ]);
  };
  const { units: [unit], redraw } = figures("bag-of-tiles", {
    route: "/api/lesson/bag", controls: { text: typed("bag-text"), scheme: choice("bag-scheme") }, params: (v) => ({ ...v, shuffle }),
    draw, fill,
  });
  $("bag-shuffle").addEventListener("click", () => { shuffle = (shuffle % 9999) + 1; unit.load(0); });
  // the chapter's exact pair: its sentence and the shuffle that swaps the two nouns (both from the figure's answer)
  $("bag-swap").addEventListener("click", () => {
    const pair = unit.data()?.pair;
    if (!pair) return;
    $("bag-text").value = pair.text;
    shuffle = pair.shuffle;
    unit.load(0);
  });
  return redraw;
}
