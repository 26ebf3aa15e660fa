// Chapters 5-6: sine waves as clock hands, learned tables and the 512 wall.

import { $, api, loader, register, slider } from "../core.js";
import { heatmap, lineChart, svg, html, fmt, widthOf, root, text, clock, numbers, signLegend } from "../charts.js";
import { divergingRGB, C, T, INK, SERIES } from "../palette.js";

// -- 5. clock hands -------------------------------------------------------------------------------
register("clock-hands", { setup: () => {
  let data = null;
  const seat = slider("clock-seat", () => load());
  const colours = { fast: C.vermillion, medium: C.blue, slow: C.green };
  const draw = () => {
    if (!data) return;
    const box = $("clock-dials");
    box.replaceChildren();
    for (const hand of data.hands) {
      const card = html("div", { class: "dial-card", "data-speed": hand.speed, "data-angle": hand.angle }, box);
      const size = widthOf(card, { min: 100 });   // a clock at its card's width (.dial-card)
      const s = svg("svg", { viewBox: `0 0 ${size} ${size}`, width: size, height: size, class: "lesson-svg", role: "img",
        "aria-label": `${hand.speed} hand, pair ${hand.pair}, at ${fmt(hand.angle_deg_mod_360, 1)} degrees` }, card);
      clock(s, { cx: size / 2, cy: size / 2, r: 0.4 * size, hands: [{ angle: hand.angle, color: colours[hand.speed], length: 0.9 }],
        arc: { from: 0, sweep: (hand.angle_deg_mod_360 * Math.PI) / 180, color: colours[hand.speed] } });
      html("p", { class: "dial-text" }, card,
        `${hand.speed} · pair ${hand.pair} (columns ${hand.columns.join(", ")}) · wavelength ${fmt(hand.wavelength, 1)} seats`);
      html("p", { class: "dial-text" }, card, `sin ${fmt(hand.sin, 3)}, cos ${fmt(hand.cos, 3)}`);
    }
    lineChart($("clock-waves"), {
      width: widthOf($("clock-waves")), height: 240, title: "sine column of each hand over seats 0 to 64",
      x: { domain: [0, 64], label: "seat" }, y: { domain: [-1.05, 1.05], label: "value" },
      series: data.hands.flatMap((h, k) => [
        { name: `${h.speed} (column ${h.columns[0]})`, xs: data.curve_positions, ys: h.curve, color: colours[h.speed],
          dash: SERIES[k].dash, width: 1.5 },
        { name: "", xs: data.positions, ys: h.wave, color: colours[h.speed], width: 0.01, points: true, hideLegend: true },
      ]),
      vlines: [{ x: Math.min(64, data.seat), label: `seat ${data.seat}`, color: INK }],
    });
    drawHeat();
  };
  // the whole table as a heatmap at the panel's width: rows are seats 0-64, columns the code's numbers
  const drawHeat = () => {
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
  const load = loader("clock-hands", async (signal) => {
    data = await api("/api/lesson/clock", { seat: seat(), d_model: $("clock-width").value }, signal);
    draw();
    numbers($("clock-numbers"), data.hands.map((h) => `${h.speed} hand (pair ${h.pair}, ${fmt(h.frequency, 6)} rad per seat): ` +
      `seat ${data.seat} → angle ${fmt(h.angle, 4)} rad = ${fmt(h.angle_deg_mod_360, 1)}° past a whole number of turns; sin ${fmt(h.sin, 4)}, cos ${fmt(h.cos, 4)}`));
  });
  $("clock-width").addEventListener("change", () => load(0));
  load(0);
  return draw;
} });

// -- 6. learned tables -------------------------------------------------------------------------------
register("learned-tables", { setup: () => {
  let data = null;
  const tokens = slider("wall-tokens", () => load());
  const stretch = slider("wall-stretch", () => load());
  const draw = () => {
    if (!data) return;
    const holder = $("wall-figure"), width = widthOf(holder), s = root(holder, width, 96,
      `a ${data.max_len}-row table and ${data.tokens} requested seats`);
    const top = Math.max(1024, data.tokens), x = (v) => 8 + (v / top) * (width - 16);
    svg("rect", { x: x(0), y: 20, width: x(data.max_len) - x(0), height: 26, fill: C.sky, stroke: C.blue }, s);
    text(s, x(0) + 4, 38, `rows 0 … ${data.max_len - 1}`, { size: 12 });
    svg("line", { x1: x(data.max_len), x2: x(data.max_len), y1: 10, y2: 58, stroke: INK, "stroke-width": 3 }, s);
    text(s, x(data.max_len), 72, `the wall: ${data.max_len}`, { size: 12, anchor: x(data.max_len) > width - 90 ? "end" : "middle", weight: 700 });
    const over = data.tokens > data.max_len;
    svg("rect", { x: x(0), y: 50, width: Math.max(2, x(data.tokens) - x(0)), height: 8,
      fill: over ? C.vermillion : C.green, class: "request" }, s);
    text(s, Math.min(width - 4, x(data.tokens)), 90, `${data.tokens} tokens asked for`, { size: 12,
      anchor: x(data.tokens) > width / 2 ? "end" : "start", color: over ? T.vermillion : T.green, weight: 700 });
    lineChart($("stretch-figure"), {
      width: widthOf($("stretch-figure")), height: 230, title: "last rows of column 0, old and stretched",
      x: { domain: [data.old_positions[0], data.old_positions[data.old_positions.length - 1]], label: "seat of the original table" },
      y: { domain: [Math.min(...data.old_values, ...data.new_values) - 0.01, Math.max(...data.old_values, ...data.new_values) + 0.01],
        label: "column 0" },
      series: [
        { name: `trained rows (${data.max_len})`, xs: data.old_positions, ys: data.old_values, color: C.blue, points: true },
        { name: `stretched rows (${data.stretch_to})`, xs: data.new_at_old_scale, ys: data.new_values, color: C.vermillion,
          dash: "2 4", points: true },
      ],
    });
  };
  const load = loader("learned-tables", async (signal) => {
    data = await api("/api/lesson/learned", { tokens: tokens(), stretch_to: stretch() }, signal);
    draw();
    const result = $("wall-result");
    result.className = `result-box ${data.ok ? "ok" : "failed"}`;
    result.replaceChildren();
    if (data.ok) {
      html("p", {}, result, `${data.tokens} tokens: fine. The table answered with shape (${data.shape.join(", ")}).`);
    } else {
      html("p", { class: "verdict" }, result, `${data.tokens} tokens: posenc raised ${data.error_type}:`);
      html("pre", { class: "error-message" }, result, data.error);
    }
    // the stretched table's answer to the same request, so that stretching shows in the status
    html("p", { class: `stretched-status ${data.stretched_reads_tokens ? "pass" : "fail"}`, id: "wall-stretched-status",
      "data-reads": String(data.stretched_reads_tokens) }, result, data.stretched_reads_tokens
      ? `Stretched to ${data.stretch_to} rows: the table reads all ${data.tokens} tokens (fine-tune before trusting the new rows).`
      : `Stretched to ${data.stretch_to} rows: still too short for ${data.tokens} tokens; stretch it further.`);
    numbers($("wall-numbers"), [
      `table of ${data.max_len} rows; ${data.tokens} tokens ${data.ok ? "read" : `stop at seat ${data.first_missing}`}`,
      `stretched to ${data.stretch_to} rows: new row j sits at old seat j × ${fmt(data.squeeze, 5)}; ` +
        `the stretched table ${data.stretched_reads_tokens ? "reads" : "still cannot read"} ${data.tokens} tokens`,
      `last trained rows, column 0: ${data.old_values.slice(-4).map((v) => fmt(v, 4)).join(", ")}`,
      `last stretched rows, column 0: ${data.new_values.slice(-4).map((v) => fmt(v, 4)).join(", ")}`,
    ]);
  });
  load(0);
  return draw;
} });
