// Sine waves as clock hands: the hands of one seat, their waves and the whole table.

import { $, choice, figureHtml, figures, menuHtml, proseHtml, sliderHtml } from "../../core.js";
import { heatmap, lineChart, svg, html, fmt, widthOf, root, text, clock, numbers, signLegend } from "../../charts.js";
import { CATEGORY_COLOURS, divergingRGB, INK } from "../../palette.js";

// The chapter's article under its kicker and heading (the page writes those from the manifest): its
// figures, controls and error box, and the data-prose places its text fills (posenc.teaching.lesson.chapters).
export const markup = [
  proseHtml("intro"),
  figureHtml("clock", {
    controls: [sliderHtml("seat", "clock-seat", { min: 0, max: 64, value: 3, primary: true }),
      menuHtml("width", "clock-width", ["16", "64", "256"], { selected: "64" })],
    error: true, body: `<div id="clock-dials" class="dials-row"></div>\n<div id="clock-waves" class="fig-box"></div>`, numbers: true,
  }),
  proseHtml("table"),
  figureHtml("heat", { body: `<div id="clock-heat" class="fig-box"></div>`, numbers: true }),
  proseHtml("table-after", "fingerprint"),
  `<div class="inline-checks" data-checks="fast-columns"></div>`,
  `<div data-prose="see-also"></div>`,
].join("\n");

export function setup() {
  const colours = { fast: CATEGORY_COLOURS.fast, medium: CATEGORY_COLOURS.medium, slow: CATEGORY_COLOURS.slow };
  const dashes = [null, "7 4", "2 3"];
  const draw = (data) => {
    const box = $("clock-dials");
    box.replaceChildren();
    for (const hand of data.hands) {
      const card = html("div", { class: "dial-card", "data-speed": hand.speed, "data-angle": hand.angle }, box);
      html("p", { class: "dial-text" }, card,
        `${hand.speed} · pair ${hand.pair} (columns ${hand.columns.join(", ")}) · wavelength ${fmt(hand.wavelength, 1)} seats`);
      html("p", { class: "dial-text" }, card, `sin ${fmt(hand.sin, 3)}, cos ${fmt(hand.cos, 3)}`);
    }
    // the clocks are drawn once every card is in the row: a card's width depends on its neighbours
    data.hands.forEach((hand, k) => {
      const card = box.children[k], size = widthOf(card, { min: 100 });   // a clock at its card's width (.dial-card)
      const s = svg("svg", { viewBox: `0 0 ${size} ${size}`, width: size, height: size, class: "lesson-svg", role: "img",
        "aria-label": `${hand.speed} hand, pair ${hand.pair}, at ${fmt(hand.angle_deg_mod_360, 1)} degrees` });
      card.prepend(s);
      clock(s, { cx: size / 2, cy: size / 2, r: 0.4 * size, hands: [{ angle: hand.angle, color: colours[hand.speed], length: 0.9 }],
        arc: { from: 0, sweep: (hand.angle_deg_mod_360 * Math.PI) / 180, color: colours[hand.speed] } });
    });
    lineChart($("clock-waves"), {
      width: widthOf($("clock-waves")), height: 240, title: "sine column of each hand over seats 0 to 64",
      x: { domain: [0, 64], label: "seat" }, y: { domain: [-1.05, 1.05], label: "value" },
      series: data.hands.flatMap((h, k) => [
        { name: `${h.speed} (column ${h.columns[0]})`, xs: data.curve_positions, ys: h.curve, color: colours[h.speed],
          dash: dashes[k % dashes.length], width: 1.5 },
        { name: "", xs: data.positions, ys: h.wave, color: colours[h.speed], width: 0.01, points: true, hideLegend: true },
      ]),
      vlines: [{ x: Math.min(64, data.seat), label: `seat ${data.seat}`, color: INK }],
    });
    drawHeat(data);
  };
  // the whole table as a heatmap at the panel's width: rows are seats 0-64, columns the code's numbers
  const drawHeat = (data) => {
    const holder = $("clock-heat"), rows = data.table.length, cols = data.d_model;
    const width = widthOf(holder), left = 52, right = 8, top = 22, plotW = width - left - right;
    const plotH = Math.min(300, rows * 4), legendY = top + plotH + 34, height = legendY + 46;
    const s = root(holder, width, height, `the sinusoidal table, seats 0 to ${rows - 1}, ${cols} numbers each`);
    const canvas = document.createElement("canvas");
    heatmap(canvas, data.table, (v) => divergingRGB(v), { cell: 1 });
    svg("image", { href: canvas.toDataURL(), x: left, y: top, width: plotW, height: plotH, preserveAspectRatio: "none",
      style: "image-rendering: pixelated", class: "heat-image" }, s);
    svg("rect", { x: left, y: top, width: plotW, height: plotH, fill: "none", stroke: "#8a8f99" }, s);
    const yOf = (seat) => top + ((seat + 0.5) / rows) * plotH, xOf = (col) => left + ((col + 0.5) / cols) * plotW;
    for (const seat of [0, 16, 32, 48, 64]) text(s, left - 6, yOf(seat) + 4, String(seat), { size: 12, anchor: "end", color: INK });
    text(s, 0, top - 8, "seat ↓", { size: 12, color: INK });
    for (const col of [0, cols / 2, cols - 1]) text(s, xOf(col), top + plotH + 16, String(col),
      { size: 12, anchor: col === 0 ? "start" : col === cols - 1 ? "end" : "middle", color: INK });
    text(s, left + plotW / 2, top - 8, "column → (fast … slow)", { size: 12, anchor: "middle", color: INK });
    if (data.seat <= rows - 1) {
      svg("line", { x1: left - 3, x2: left + plotW + 3, y1: yOf(data.seat), y2: yOf(data.seat), stroke: INK,
        "stroke-width": 2, class: "seat-marker" }, s);
    }
    signLegend(s, { x: left, y: legendY, width: Math.min(180, plotW), span: 1, label: "table value", format: (v) => fmt(v, 0) });
    // what the picture shows, counted on the very numbers it is drawn from: sign changes down each column
    const flips = (col) => data.table.slice(1).filter((r, i) => r[col] * data.table[i][col] < 0).length;
    const first = flips(0), last = flips(cols - 2);
    holder.dataset.flipsFirst = String(first);
    holder.dataset.flipsLast = String(last);
    numbers($("heat-numbers"), [
      `${rows} seats × ${cols} numbers, every value between ${fmt(Math.min(...data.table.flat()), 3)} and ${fmt(Math.max(...data.table.flat()), 3)}`,
      `column 0 (the fastest sine) changes sign ${first} times over seats 0 to ${rows - 1}; column ${cols - 2} (the slowest sine) ${last} times`,
    ]);
  };
  const fill = (data) => {
    numbers($("clock-numbers"), data.hands.map((h) => `${h.speed} hand (pair ${h.pair}, ${fmt(h.frequency, 6)} rad per seat): ` +
      `seat ${data.seat} → angle ${fmt(h.angle, 4)} rad = ${fmt(h.angle_deg_mod_360, 1)}° past a whole number of turns; sin ${fmt(h.sin, 4)}, cos ${fmt(h.cos, 4)}`));
  };
  return figures("clock-hands", {
    route: "/api/lesson/clock", controls: { seat: "clock-seat", d_model: choice("clock-width") }, draw, fill,
  }).redraw;
}
