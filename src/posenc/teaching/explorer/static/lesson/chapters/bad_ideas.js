// Two ideas that fail: raw seat numbers and fractions of the sentence.

import { $, figureHtml, figures, proseHtml, sliderHtml } from "../../core.js";
import { svg, fmt, fmtInt, widthOf, root, text, numbers, hbars } from "../../charts.js";
import { CATEGORY_COLOURS, SCHEME_COLOURS, INK, textColour } from "../../palette.js";

// The chapter's article under its kicker and heading (the page writes those from the manifest): its
// figures, controls and error box, and the data-prose places its text fills (posenc.teaching.lesson.chapters).
export const markup = [
  proseHtml("intro", "idea1"),
  figureHtml("raw", {
    controls: [sliderHtml("seat", "raw-seat", { min: 0, max: 2000, value: 500, primary: true })],
    error: true, body: `<div id="raw-figure" class="fig-box"></div>`, numbers: true,
  }),
  proseHtml("idea1-measured", "idea2"),
  figureHtml("frac", {
    controls: [sliderHtml("words in the sentence", "frac-len", { min: 2, max: 1000, value: 4 })],
    body: `<div id="frac-figure" class="fig-box"></div>`, numbers: true,
  }),
  proseHtml("idea2-measured", "after"),
].join("\n");

export function setup() {
  const draw = (data) => {
    hbars($("raw-figure"), [
      { label: "words alone", value: data.cosine_words, color: SCHEME_COLOURS.nope },
      { label: `+ raw seat ${data.raw_seat}`, value: data.cosine_raw, color: CATEGORY_COLOURS.wrong },
      { label: `+ sine code of seat ${data.raw_seat}`, value: data.cosine_sine, color: SCHEME_COLOURS.sinusoidal },
    ], { label: "cosine similarity of dog and man", axis: "cosine similarity of “dog” and “man”", max: 1,
      format: (v) => fmt(v, 6) });
    const holder = $("frac-figure"), width = widthOf(holder), s = root(holder, width, 92,
      `fraction codes of a ${data.sentence_len}-word sentence on a ruler from 0 to 1`);
    const x = (v) => 12 + v * (width - 24);
    svg("line", { x1: x(0), x2: x(1), y1: 40, y2: 40, stroke: INK, "stroke-width": 2 }, s);
    text(s, x(0), 70, "0", { anchor: "middle" });
    text(s, x(1), 70, "1", { anchor: "middle" });
    // enough digits to tell two seats apart, and a label only where it clears the one before it
    const digits = Math.max(2, Math.ceil(-Math.log10(data.step) + 1e-9));
    let clear = -Infinity;
    data.fractions.forEach((f) => {
      svg("line", { x1: x(f), x2: x(f), y1: 28, y2: 52, stroke: INK, "stroke-width": 2.5, class: "tick-mark" }, s);
      // a label that would start left of the ruler's edge starts at its tick instead, one that would
      // end past the right edge ends at its tick: no label is cut off at the figure's edges
      const label = fmt(f, digits), w = label.length * 7.2;
      const anchor = x(f) - w / 2 < 2 ? "start" : x(f) + w / 2 > width - 2 ? "end" : "middle";
      const left = anchor === "start" ? x(f) : anchor === "end" ? x(f) - w : x(f) - w / 2;
      if (left < clear) return;
      text(s, x(f), 20, label, { anchor, size: 12 }).setAttribute("class", "tick-label");
      clear = left + w + 4;
    });
    text(s, width / 2, 88, `one step = ${fmt(data.step, 4)} (in a 4-word sentence: ${fmt(data.step_4_words, 2)})`,
      { anchor: "middle", size: 12, color: textColour(CATEGORY_COLOURS.wrong), weight: 700 });
  };
  const fill = (data) => {
    numbers($("raw-numbers"), [
      `[${data.word.join(", ")}] + ${data.raw_seat} = [${data.stamped.map((v) => fmt(v, 2)).join(", ")}]`,
      `the seat's two numbers (each ${data.raw_seat}) are ${fmtInt(data.raw_ratio)} times longer than the pair `
        + `[${data.word.join(", ")}]; at the text's scale, the raw code (${data.d_model} numbers, each ${data.raw_seat}) is `
        + `${fmtInt(data.raw_ratio_dog)} times longer than the vector of “dog”, the bars' word (length ${fmt(data.word_length, 2)})`,
      `cosine(dog, man): alone ${fmt(data.cosine_words, 4)}, with the raw seat ${fmt(data.cosine_raw, 6)}, with the sine code ${fmt(data.cosine_sine, 4)}`,
      `with the sine code at any seat from 0 to 2000 the cosine stays between ${fmt(data.cosine_sine_range[0], 3)} and `
        + `${fmt(data.cosine_sine_range[1], 3)}: the sine code (length ${fmt(data.sine_length, 2)}) never outgrows the words `
        + `(length about ${fmt(data.word_length, 2)}), while the raw seat drives the cosine to 1`,
    ]);
    numbers($("frac-numbers"), [
      `${data.sentence_len} words: codes ${data.fractions.map((v) => fmt(v, 3)).join(", ")}${data.sentence_len > data.fractions.length ? ", …" : ""}`,
      `one step = 1 / ${data.sentence_len} = ${fmt(data.step, 5)}; in a 4-word sentence one step is ${fmt(data.step_4_words, 2)}`,
    ]);
  };
  return figures("bad-ideas", {
    route: "/api/lesson/bad-ideas", controls: { raw_seat: "raw-seat", sentence_len: "frac-len" }, draw, fill,
  }).redraw;
}
