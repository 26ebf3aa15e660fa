// Chapters 1-4: the bag of tiles, word + position, the two bad ideas, the three rules.

import { $, api, loader, register, slider } from "../core.js";
import { svg, html, fmt, widthOf, root, text, barRow, signLegend, numbers, hbars, stackLabels } from "../charts.js";
import { SCHEME_COLOURS, TILE_COLOURS, C, T, INK, MUTED, diverging } from "../palette.js";

// -- 1. the bag of tiles -----------------------------------------------------------------------------
register("bag-of-tiles", { setup: () => {
  // The first shuffle is shown at once, so the two strips differ from the first look on.
  let shuffle = 1, data = null;
  const draw = () => {
    if (!data) return;
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
        color: same ? T.green : T.vermillion, weight: 700 });
    });
    const ly = 26 + data.words.length * rowH + 4, lw = Math.min(150, (width - 24) / 2);
    signLegend(s, { x: 0, y: ly, width: lw, span, label: "outputs", format: (v) => fmt(v, 2) });
    signLegend(s, { x: lw + 24, y: ly, width: lw, span: rounding ? data.rounding_level : deltaSpan, label: "difference",
      format: (v) => fmt(v, 2) });
  };
  const load = loader("bag-of-tiles", async (signal) => {
    data = await api("/api/lesson/bag", { text: $("bag-text").value, shuffle, scheme: $("bag-scheme").value }, signal);
    draw();
    numbers($("bag-numbers"), [
      `scheme: ${data.scheme}; sentence: “${data.words.join(" ")}”; shuffled: “${data.shuffled.join(" ")}”.`,
      ...data.words.map((w, i) => `“${w}” (seat ${i}): largest change of its output after the shuffle ${fmt(data.difference[i], 3)}`),
      `largest change over all words: ${fmt(data.largest_difference, 3)}${data.largest_difference < 1e-9 ? " (rounding: the same vectors)" : ""}`,
    ]);
  });
  $("bag-shuffle").addEventListener("click", () => { shuffle = (shuffle % 9999) + 1; load(0); });
  $("bag-scheme").addEventListener("change", () => load(0));
  $("bag-text").addEventListener("input", () => load(300));
  load(0);
  return draw;
} });

// -- 2. word + position = input ------------------------------------------------------------------
register("word-plus-position", { setup: () => {
  let data = null;
  const seat = slider("input-seat", () => load());
  const stdOf = () => {
    const v = $("input-std").value, width = Number($("input-width").value);
    return v === "sqrt" ? 0.02 * Math.sqrt(width) : Number(v);
  };
  const draw = () => {
    if (!data) return;
    const holder = $("input-figure"), width = widthOf(holder), rowH = 64, gap = 30;
    const s = root(holder, width, 3 * (rowH + gap) + 50, `word vector plus position vector equals input, ${data.d_model} numbers each`);
    const span = Math.max(...[...data.word_vector, ...data.position_vector, ...data.input].map(Math.abs));
    const rows = [[data.word_vector, `word “${data.word}” (${data.d_model} numbers, length ${fmt(data.word_norm, 2)})`, "word"],
      [data.position_vector, `+ position of seat ${data.seat} (${data.d_model} numbers, length ${fmt(data.position_norm, 2)})`, "position"],
      [data.input, `= input to the first layer (${data.d_model} numbers)`, "input"]];
    rows.forEach(([values, label, row], k) => barRow(s, values, { x: 0, y: 18 + k * (rowH + gap), width, height: rowH, span, label, row }));
    signLegend(s, { x: 0, y: 3 * (rowH + gap) + 4, width: Math.min(160, width - 10), span, label: "bar height and colour",
      format: (v) => fmt(v, 2) });
  };
  const load = loader("word-plus-position", async (signal) => {
    const word = $("input-word").value.trim() || "dog";
    data = await api("/api/lesson/input", { word, seat: seat(), d_model: $("input-width").value,
      embed_std: Number(stdOf().toPrecision(6)) }, signal);
    draw();
    const show = (v) => `[${v.map((x) => fmt(x, 2)).join(", ")}]`;
    numbers($("input-numbers"), [
      `word “${data.word}”, entries drawn with standard deviation ${fmt(data.embed_std, 4)}: ${show(data.word_vector)}`,
      `position of seat ${data.seat}: ${show(data.position_vector)}`,
      `input = word + position: ${show(data.input)}`,
      `lengths: word ${fmt(data.word_norm, 3)}, position ${fmt(data.position_norm, 3)} (always √(d/2)); position / word = ${fmt(data.ratio, 2)}`,
      `direction of the input against the word alone (cosine): ${fmt(data.cosine_input_word, 3)}`,
    ]);
  });
  $("input-width").addEventListener("change", () => load(0));
  $("input-std").addEventListener("change", () => load(0));
  $("input-word").addEventListener("input", () => load(300));
  load(0);
  return draw;
} });

// -- 3. bad ideas -----------------------------------------------------------------------------------
register("bad-ideas", { setup: () => {
  let data = null;
  const seat = slider("raw-seat", () => load());
  const len = slider("frac-len", () => load());
  const draw = () => {
    if (!data) return;
    hbars($("raw-figure"), [
      { label: "words alone", value: data.cosine_words, color: C.blue },
      { label: `+ raw seat ${data.raw_seat}`, value: data.cosine_raw, color: C.vermillion },
      { label: `+ sine code of seat ${data.raw_seat}`, value: data.cosine_sine, color: SCHEME_COLOURS.sinusoidal },
    ], { label: "cosine similarity of dog and man", max: 1, format: (v) => fmt(v, 6) });
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
      svg("line", { x1: x(f), x2: x(f), y1: 28, y2: 52, stroke: C.blue, "stroke-width": 2.5, class: "tick-mark" }, s);
      const label = fmt(f, digits), half = (label.length * 7.2) / 2;
      if (x(f) - half < clear) return;
      text(s, x(f), 20, label, { anchor: "middle", size: 12 }).setAttribute("class", "tick-label");
      clear = x(f) + half + 4;
    });
    text(s, width / 2, 88, `one step = ${fmt(data.step, 4)} (in a 4-word sentence: ${fmt(data.step_4_words, 2)})`,
      { anchor: "middle", size: 12, color: T.vermillion, weight: 700 });
  };
  const load = loader("bad-ideas", async (signal) => {
    data = await api("/api/lesson/bad-ideas", { raw_seat: seat(), sentence_len: len() }, signal);
    draw();
    numbers($("raw-numbers"), [
      `[${data.word.join(", ")}] + ${data.raw_seat} = [${data.stamped.map((v) => fmt(v, 2)).join(", ")}]`,
      `the raw position vector is ${fmt(data.raw_ratio, 1)} times longer than the word vector`,
      `cosine(dog, man): alone ${fmt(data.cosine_words, 4)}, with the raw seat ${fmt(data.cosine_raw, 6)}, with the sine code ${fmt(data.cosine_sine, 4)}`,
      `with the sine code at any seat from 0 to 2000 the cosine stays between ${fmt(data.cosine_sine_range[0], 3)} and `
        + `${fmt(data.cosine_sine_range[1], 3)}: the sine code (length ${fmt(data.sine_length, 2)}) never outgrows the words `
        + `(length about ${fmt(data.word_length, 2)}), while the raw seat drives the cosine to 1`,
    ]);
    numbers($("frac-numbers"), [
      `${data.sentence_len} words: codes ${data.fractions.map((v) => fmt(v, 3)).join(", ")}${data.sentence_len > data.fractions.length ? ", …" : ""}`,
      `one step = 1 / ${data.sentence_len} = ${fmt(data.step, 5)}; in a 4-word sentence one step is ${fmt(data.step_4_words, 2)}`,
    ]);
  });
  load(0);
  return draw;
} });

// -- 4. the three rules -------------------------------------------------------------------------------
register("three-rules", { setup: () => {
  const len = slider("rules-len", () => load());
  const load = loader("three-rules", async (signal) => {
    const d = await api("/api/lesson/rules", { length: len(), d_model: $("rules-width").value }, signal);
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
  });
  $("rules-width").addEventListener("change", () => load(0));
  load(0);
  return null;
} });
