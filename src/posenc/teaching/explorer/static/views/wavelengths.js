// View 4 of the explorer: wavelengths and scalings.

import { extent, fmt, fmtInt, html, lineChart, widthOf } from "../charts.js";
import { onResize } from "./workbench.js";
import { MARK_COLOURS, SCALING_LABELS } from "../palette.js";
import { $, COLORS, PALETTE, rope, scaling, focus, api, showError, loader, slider, pow2, escapeText, registry, register,
  scalingTypes, scalingSliders } from "../core.js";

export function setupWavelengths() {
  const train = slider("wl-train-log", (v) => { scaling.trainLen = v; changed(); }, pow2, fmtInt);
  const seqLen = slider("wl-seq-log", (v) => { scaling.seqLen = v; changed(); }, pow2, fmtInt);
  Object.assign(scaling, { trainLen: train(), seqLen: seqLen() });
  const fixtureSelect = $("wl-fixture");

  function changed() {
    if (registry.config) registry.config.stale = true;
    refresh();
  }

  // The overlays are the registered scalings with explorer metadata (GET /api/scalings): one checkbox
  // each, each curve in the colour and dash the metadata gives, and one slider per parameter.
  const types = {};
  const colour = (name) => (types[name] && types[name].colour) || COLORS[name];
  async function buildOverlays() {
    if (Object.keys(types).length) return;
    const box = $("wl-methods");
    for (const label of box.querySelectorAll("label")) label.remove();
    const all = await scalingTypes();
    scalingSliders($("wl-params"), all.filter((s) => s.overlay), changed);
    for (const s of all) {
      types[s.name] = s;
      if (!s.overlay) continue;
      const label = html("label", {}, box);
      html("input", { type: "checkbox", value: s.name }, label).checked = s.shown;
      label.append(` ${s.label}`);
    }
  }
  const methods = () => [...$("wl-methods").querySelectorAll("input:checked")].map((i) => i.value);
  $("wl-methods").addEventListener("change", () => refresh());
  fixtureSelect.addEventListener("change", () => refresh(0));

  const refresh = loader("wavelengths", async (signal) => {
    await buildOverlays();
    const name = fixtureSelect.value;
    $("wl-methods").disabled = Boolean(name);
    if (name) {
      const f = await api("/api/fixture", { name }, signal);
      drawFixture(f);
      return;
    }
    const d = await api("/api/wavelengths", { rotary_dim: rope.headDim, base: rope.base,
      train_len: scaling.trainLen, methods: methods().join(","), seq_len: scaling.seqLen, ...scaling.params }, signal);
    drawSettings(d);
  });

  let lastChart = null;
  onResize($("view-wavelengths"), () => { if (lastChart) chart(...lastChart); });

  function chart(pairs, series, hlines, bands) {
    lastChart = [pairs, series, hlines, bands];
    // Drawn at the panel's width so its text keeps its size on a phone; the line labels move from a
    // right margin into the plot when the panel is too narrow for the margin.
    const width = widthOf($("wl-chart"));
    const all = series.map((s) => s.ys).concat([hlines.map((h) => h.y)]);
    const readout = (i) => {
      $("wl-readout").innerHTML = `pair ${i}: ` + series.map((s) =>
        `${escapeText(s.name)} <span class="num" data-series="${escapeText(s.name)}" data-value="${s.ys[i]}">${s.ys[i] === null ? "no rotation" : fmt(s.ys[i], 1)}</span>`).join(" · ");
      $("wl-readout").dataset.pair = i;
    };
    const marked = focus.pair !== null && focus.pair < pairs.length;
    lineChart($("wl-chart"), {
      width, height: 430, title: "wavelength per pair", wide: true, labelsOutside: width >= 720 ? 200 : 0,
      x: { domain: [0, Math.max(1, pairs.length - 1)], label: "rotation pair i (fast → slow)" },
      y: { domain: extent(all, { positiveOnly: true }), log: true, label: "wavelength (positions, log)" },
      series, hlines, bands,
      vlines: marked ? [{ x: focus.pair, color: MARK_COLOURS.focus, label: `pair ${focus.pair} (from the dials)` }] : [],
      onHover: (x) => { const i = Math.max(0, Math.min(pairs.length - 1, Math.round(x))); readout(i); return i; },
    });
    readout(marked ? focus.pair : 0);
  }

  // "slowed by ×1…×8": what a method without a ramp does, as the range of old/new frequency.
  const slowed = (m) => (m.slowdown === null ? "no rotated pairs"
    : m.slowdown[0] === m.slowdown[1] || Math.abs(m.slowdown[1] / m.slowdown[0] - 1) < 1e-9
      ? `every pair slowed by ×${fmt(m.slowdown[0], 3)}`
      : `slowed by ×${fmt(m.slowdown[0], 3)} … ×${fmt(m.slowdown[1], 3)}`);
  const what = (m) => (m.split ? `${m.kept} pairs kept, ${m.blended} blended, ${m.divided} divided by the factor` : slowed(m));

  function drawSettings(d) {
    const series = [{ name: SCALING_LABELS.default, key: "default", xs: d.pairs, ys: d.default.wavelength, color: COLORS.default, width: 2.5, points: d.pairs.length <= 32 }];
    const bands = [], hlines = [
      { y: d.train_len, label: `trained context ${fmtInt(d.train_len)}`, color: "#333" },
    ];
    if (d.extended_len !== null) {
      hlines.push({ y: d.extended_len, label: `target ${fmtInt(d.extended_len)} (× ${d.factor})`, color: "#777", dash: "2 3" });
    }
    for (const [name, m] of Object.entries(d.methods)) {
      const t = types[name] || {};
      series.push({ name: `${name}${t.length_dependent ? ` at length ${fmtInt(d.seq_len)}` : ""}`, key: name, xs: d.pairs, ys: m.wavelength,
        color: colour(name), dash: t.dash || undefined });
      if (m.split && m.ramp) {
        bands.push({ x0: m.ramp[0] - 0.5, x1: m.ramp[1] + 0.5, color: colour(name), label: `${name} ramp` });
      }
    }
    for (const [name, [a, b]] of Object.entries(d.thresholds)) {
      hlines.push({ y: a, color: colour(name), dash: "1 3", label: `${name}: keep below ${fmtInt(a)}` });
      hlines.push({ y: b, color: colour(name), dash: "1 3", label: `${name}: divide above ${fmtInt(b)}` });
    }
    const ramps = Object.values(types).filter((t) => t.ramp).map((t) => t.label).join(" and ");
    chart(d.pairs, series, hlines, bands);
    $("wl-caption").textContent = `${d.full_turns_in_training} of ${d.pairs.length} pairs complete a full turn inside the trained context of ${fmtInt(d.train_len)}. ` +
      (bands.length ? `Outlined: the pairs a ramp blends between keeping θ and dividing it by the factor (${ramps} only). ` : "") +
      "Methods without a ramp slow each pair by its own amount, given as a range.";
    const rows = Object.entries(d.methods).map(([name, m]) => `<tr data-method="${name}"><td>${name}</td>
      <td class="num" data-kept="${m.split ? m.kept : ""}">${m.split ? m.kept : "–"}</td>
      <td class="num">${m.split ? m.blended : "–"}</td><td class="num">${m.split ? m.divided : "–"}</td>
      <td class="num" data-slowdown="${m.slowdown ? m.slowdown.join(",") : ""}">${slowed(m).replace(/^(every pair )?slowed by /, "")}</td>
      <td class="num">${fmt(m.attention_factor, 4)}</td><td><code>${escapeText(JSON.stringify(m.config))}</code></td></tr>`);
    $("wl-table").innerHTML = `<thead><tr><th>method</th><th>pairs kept</th><th>blended</th><th>divided by factor</th>
      <th>slow-down (old θ / new θ)</th><th>attention factor</th><th>config</th></tr></thead>
      <tbody>${rows.join("") || '<tr><td colspan="7">no overlay selected</td></tr>'}</tbody>`;
    $("wl-fixture-fields").hidden = true;
  }

  function drawFixture(f) {
    const series = [{ name: `${f.name}: rope_theta ${fmt(f.base, 0)}, no scaling`, key: "default", xs: f.pairs, ys: f.default.wavelength,
      color: COLORS.default, width: 2.5 }];
    const curveNames = { configured: `${f.rope_type} as configured`,
      at_max_position_embeddings: `${f.rope_type} at ${fmtInt(f.max_position_embeddings)} tokens`,
      short: "short factors (up to the trained length)", long: "long factors (past the trained length)" };
    const bands = [];
    Object.entries(f.curves).forEach(([key, c], i) => {
      // every curve of the fixture is its scaling's (LongRoPE's short and long factors alike): dashes tell them apart
      series.push({ name: curveNames[key] || key, key: f.rope_type, xs: f.pairs, ys: c.wavelength, color: colour(f.rope_type) || PALETTE[0],
        dash: i ? "6 3" : undefined });
      if (c.split && c.ramp) bands.push({ x0: c.ramp[0] - 0.5, x1: c.ramp[1] + 0.5, color: colour(f.rope_type), label: `${f.rope_type} ramp` });
    });
    const hlines = [{ y: f.train_len, label: `trained context ${fmtInt(f.train_len)}`, color: "#333" }];
    if (f.max_position_embeddings !== f.train_len) hlines.push({ y: f.max_position_embeddings, color: "#777", dash: "2 3",
      label: `max_position_embeddings ${fmtInt(f.max_position_embeddings)}` });
    chart(f.pairs, series, hlines, bands);
    const parts = Object.entries(f.curves).map(([key, c]) => (Object.keys(f.curves).length > 1 ? `${curveNames[key]}: ` : "") + what(c));
    $("wl-caption").textContent = `${f.name} (${f.model_type}): head_dim ${f.head_dim}, ${f.rotary_dim} rotated features, ` +
      `layout ${f.layout}; ${f.rope_type === "default" ? SCALING_LABELS.default : parts.join("; ")}.`;
    const first = Object.values(f.curves)[0];
    $("wl-table").innerHTML = `<thead><tr><th>fixture</th><th>rope type</th><th>rope_theta</th><th>rotary_dim</th>
      <th>factor (as stated)</th><th>attention factor</th></tr></thead><tbody><tr data-fixture="${escapeText(f.name)}"><td>${escapeText(f.name)}</td>
      <td>${f.rope_type}</td><td class="num">${fmt(f.base, 0)}</td><td class="num">${f.rotary_dim}</td>
      <td class="num">${f.factor === null ? "not stated" : fmt(f.factor, 2)}</td><td class="num">${fmt(first.attention_factor, 4)}</td></tr></tbody>`;
    const fields = $("wl-fixture-fields");
    fields.textContent = `config.json fields:\n${JSON.stringify(f.config_fields, null, 2)}`;
    fields.hidden = false;
  }

  api("/api/fixtures").then((list) => {
    for (const f of list.fixtures) {
      if (f.error) continue;
      html("option", { value: f.name }, fixtureSelect, `${f.name} (${f.rope_type}, θ=${fmt(f.base, 0)})`);
    }
  }).catch((err) => showError("wavelengths", err.message));
  register("wavelengths", { refresh, usesRope: true });
}
