// View 1 of the explorer: wave fingerprint.

import { bars, cellAt, colourScale, fmt, fmtInt, heatmap, html, lineChart, signScale, widthOf } from "../charts.js";
import { diverging as divergingCSS, divergingRGB as diverging, sequential } from "../palette.js";
import { $, COLORS, api, loader, slider, pow10, valueSpan, register } from "../core.js";
import { heatAxes, onResize } from "./workbench.js";

export function setupFingerprint() {
  const st = { table: null, cell: null, size: 1, hover: null };
  const dModel = slider("fp-d-model", () => refresh());
  const length = slider("fp-length", (v) => { $("fp-pos").max = v - 1; refresh(); });
  const base = slider("fp-base-log", () => refresh(), pow10, (v) => fmtInt(v));
  const seat = slider("fp-pos", () => drawSeat());
  const canvas = $("fp-heat"), cursor = $("fp-heat-cursor");

  const params = () => ({ length: length(), d_model: dModel(), base: base() });

  const refresh = loader("fingerprint", async (signal) => {
    const [table, prints] = await Promise.all([
      api("/api/sinusoidal", params(), signal),
      api("/api/fingerprint", { text: $("fp-text").value, d_model: dModel(), base: base() }, signal),
    ]);
    st.table = table;
    st.size = heatmap(canvas, table.table, diverging, { maxWidth: 560, maxHeight: 560 });
    zoomCanvas(canvas, 760);
    canvas.dataset.rows = table.length;
    canvas.dataset.cols = table.d_model;
    canvas.dataset.cell = st.size;
    $("fp-rows").textContent = table.length - 1;
    $("fp-cols").textContent = table.d_model - 1;
    heatAxes(canvas.parentElement, table.length, table.d_model, { rowLabel: "position", colLabel: "dimension" });
    signScale($("fp-heat-scale"), { label: "table value", width: widthOf($("fp-heat-scale")) });
    drawSeat();
    drawBarcodes(prints);
    // The readout always describes a cell of the table on screen: a cell the new settings removed is
    // pulled to the nearest one that still exists, and every change recomputes its formula.
    if (st.hover) {
      hoverCell({ row: Math.min(st.hover.row, table.length - 1), col: Math.min(st.hover.col, table.d_model - 1) }, 0);
    }
  });

  // Blocks are drawn at whole pixels; CSS then stretches the canvas to the panel's width (keeping square
  // cells) unless that would make it taller than `maxHeight`.
  function zoomCanvas(node, maxHeight) {
    const panel = node.closest(".panel");
    const room = panel ? widthOf(panel, { min: 0, fallback: 0 }) - 40 : node.width;   // 40 px: the row tick labels
    if (room <= 0) { node.style.width = ""; return; }
    const zoom = Math.min(room / node.width, maxHeight / node.height);
    node.style.width = `${Math.floor(node.width * zoom)}px`;
  }

  function drawSeat() {
    if (!st.table) return;
    const pos = Math.min(seat(), st.table.length - 1);
    $("fp-seat-label").textContent = pos;
    const row = st.table.table[pos];
    const node = bars($("fp-seat-bars"), row, { width: widthOf($("fp-seat-bars")), height: 110,
      colour: (v) => divergingCSS(v),
      domain: [-1, 1], label: `position vector of seat ${pos}` });
    node.dataset.pos = pos;
    signScale($("fp-seat-scale"), { label: "bar height and colour", width: widthOf($("fp-seat-scale")) });
    node.dataset.values = JSON.stringify(row);
    const box = canvas.getBoundingClientRect();
    const scaleY = box.height / canvas.height || 1;
    let band = $("fp-seat-band");
    if (!band) band = html("div", { id: "fp-seat-band", class: "heat-row" }, canvas.parentElement);
    band.style.top = `${pos * st.size * scaleY}px`;
    band.style.height = `${Math.max(2, st.size * scaleY)}px`;
    band.style.width = `${box.width}px`;
  }

  const cellLoader = loader("fingerprint", async (signal) => {
    const { row, col } = st.hover;
    const cell = await api("/api/sinusoidal/cell", { pos: row, dim: col, d_model: dModel(), base: base() }, signal);
    st.cell = cell;
    const fn = cell.function;
    $("fp-formula").innerHTML = `
      <div>PE[<b>${cell.pos}</b>, <b>${cell.dim}</b>] = ${fn}(pos / base<sup>2i/d</sup>), pair i = ${cell.pair}</div>
      <div>= ${fn}(${cell.pos} / ${fmt(cell.base, 0)}<sup>2·${cell.pair}/${cell.d_model}</sup>)
        = ${fn}(${cell.pos} / ${fmt(cell.denominator, 5)})</div>
      <div>= ${fn}(${fmt(cell.angle, 5)} rad)${cell.angle >= 2 * Math.PI ? ` = ${fn}(${fmt(cell.angle_reduced, 5)} rad after whole turns)` : ""}</div>
      <div class="result">= ${valueSpan("fp-cell-value", cell.value, 6, ` data-pos="${cell.pos}" data-dim="${cell.dim}"`)}</div>
      <div class="muted">this wave repeats every ${fmt(cell.wavelength, 2)} positions</div>`;
    const column = st.table.table.map((r) => r[col]);
    const xs = column.map((_, i) => i);
    lineChart($("fp-wave"), {
      width: widthOf($("fp-wave")), height: 170, title: `column ${col} over positions`,
      x: { domain: [0, Math.max(1, xs.length - 1)], label: `position (column ${col})` },
      y: { domain: [-1.05, 1.05], label: "value" },
      series: [{ name: `column ${col}`, xs, ys: column, color: COLORS.sinusoidal, points: true }],
      vlines: [{ x: row, color: "#333", label: `pos ${row}` }], legend: false,
    });
  }, { delay: 25 });

  function hoverCell(cell, wait = 25) {
    st.hover = cell;
    const box = canvas.getBoundingClientRect();
    const sx = box.width / canvas.width || 1, sy = box.height / canvas.height || 1;
    cursor.hidden = false;
    cursor.style.left = `${cell.col * st.size * sx}px`;
    cursor.style.width = `${Math.max(2, st.size * sx)}px`;
    cursor.style.height = `${box.height}px`;
    cellLoader(wait);
  }

  canvas.tabIndex = 0;
  canvas.addEventListener("keydown", (event) => {
    if (!st.table) return;
    const moves = { ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0] };
    if (!(event.key in moves)) return;
    event.preventDefault();
    const here = st.hover || { row: 0, col: 0 };
    const [dr, dc] = moves[event.key];
    hoverCell({ row: Math.max(0, Math.min(st.table.length - 1, here.row + dr)),
      col: Math.max(0, Math.min(st.table.d_model - 1, here.col + dc)) });
  });
  // Mouse hover, and a tap or click (touch screens have no hover), both pick the cell under the pointer.
  const pick = (event, always) => {
    if (!st.table) return;
    const cell = cellAt(canvas, event, st.size);
    if (cell.row < 0 || cell.col < 0 || cell.row >= st.table.length || cell.col >= st.table.d_model) return;
    if (!always && st.hover && st.hover.row === cell.row && st.hover.col === cell.col) return;
    hoverCell(cell);
  };
  canvas.addEventListener("mousemove", (event) => pick(event, false));
  canvas.addEventListener("click", (event) => pick(event, true));

  function drawBarcodes(prints) {
    const box = $("fp-barcodes");
    box.replaceChildren();
    prints.words.forEach((word, i) => {
      const row = html("div", { class: "barcode" }, box);
      html("span", { class: "barcode-label" }, row, `seat ${i} · ${word}`);
      const strip = html("canvas", { class: "barcode-strip", "data-seat": i }, row);
      heatmap(strip, [prints.vectors[i]], diverging, { maxWidth: 420, maxHeight: 22 });
      strip.style.height = "22px";
    });
    const scale = html("div", { class: "scale" }, box);
    signScale(scale, { label: "barcode value", width: widthOf(scale) });
    const dist = $("fp-dist");
    const top = Math.max(...prints.distances.flat());
    heatmap(dist, prints.distances, (v) => sequential(v / (top || 1)), { maxWidth: 260, maxHeight: 260 });
    heatAxes(dist, prints.words.length, prints.words.length, { rowLabel: "seat", colLabel: "seat" });
    colourScale($("fp-dist-scale"), sequential, { lo: 0, hi: top, label: "distance |PE[p] − PE[q]|",
      width: widthOf($("fp-dist-scale")), format: (v) => fmt(v, 2) });
  }

  $("fp-text").addEventListener("input", () => refresh(200));
  register("fingerprint", { refresh });
  onResize($("view-fingerprint"), () => refresh(0));
}
