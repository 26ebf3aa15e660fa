// The posenc explorer page. Every number drawn here is fetched from the server's JSON API, which
// computes it with posenc's own functions; this file only lays the numbers out.

import {
  bars, cellAt, dial, diverging, extent, fmt, fmtInt, heatmap, html, lineChart, sequential,
} from "./charts.js";

const $ = (id) => document.getElementById(id);
const COLORS = {
  q: "#1f77b4", k: "#ff7f0e", rope: "#1f77b4", sinusoidal: "#d62728", default: "#222222",
  linear: "#9467bd", ntk: "#2ca02c", dynamic: "#17becf", yarn: "#ff7f0e", llama3: "#e377c2",
  bfloat16: "#d62728", float16: "#ff7f0e", float32: "#1f77b4", posenc: "#2ca02c",
};
const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
  "#bcbd22", "#17becf"];

// -- shared state: the RoPE settings every view uses -------------------------------------------------
const rope = { headDim: 16, base: 10000 };
const scaling = { trainLen: 8192, factor: 8, seqLen: 32768, betaFast: 32, betaSlow: 1, low: 1, high: 4 };
// The rotation pair picked on a clock dial; the wavelength and precision views mark it too.
const focus = { pair: null };

// -- talking to the server ------------------------------------------------------------------------------
async function api(path, params = {}, signal = undefined) {
  const url = new URL(path, window.location.origin);
  for (const [key, value] of Object.entries(params)) url.searchParams.set(key, String(value));
  const response = await fetch(url, { signal });
  let body = null;
  try { body = await response.json(); } catch (err) { body = null; }
  if (!response.ok) {
    const detail = body && body.detail ? body.detail : `${response.status} ${response.statusText}`;
    throw new Error(typeof detail === "string" ? detail : JSON.stringify(detail));
  }
  return body;
}

function section(name) { return $(`view-${name}`); }

function showError(name, message, selector = ".error") {
  const box = section(name).querySelector(selector);
  box.textContent = message;
  box.hidden = false;
}

function clearError(name, selector = ".error") {
  const box = section(name).querySelector(selector);
  box.hidden = true;
  box.textContent = "";
}

function rendered(name) {
  const node = section(name);
  node.dataset.renders = String(Number(node.dataset.renders || 0) + 1);
}

// A loader that debounces, cancels the request it supersedes, and reports errors in its view.
function loader(name, load, { delay = 70, selector = ".error" } = {}) {
  let timer = null, controller = null;
  return function schedule(wait = delay) {
    clearTimeout(timer);
    timer = setTimeout(async () => {
      if (controller) controller.abort();
      controller = new AbortController();
      const mine = controller;
      try {
        await load(mine.signal);
        if (mine.signal.aborted) return;
        clearError(name, selector);
        rendered(name);
      } catch (err) {
        if (err.name !== "AbortError") showError(name, err.message, selector);
      }
    }, wait);
  };
}

// Slider <-> output wiring; `transform` maps the slider's value to the value used.
function slider(id, onChange, transform = Number, format = String) {
  const input = $(id), out = $(`${id}-out`) || $(id.replace(/-log$/, "") + "-out");
  const read = () => transform(Number(input.value));
  const update = () => { if (out) out.textContent = format(read()); };
  input.addEventListener("input", () => { update(); onChange(read()); });
  update();
  return read;
}

const pow2 = (v) => Math.round(2 ** v);
const pow10 = (v) => Number((10 ** v).toPrecision(3));

function escapeText(text) {
  const node = document.createElement("span");
  node.textContent = text;
  return node.innerHTML;
}

function valueSpan(id, value, digits = 6, extra = "") {
  return `<span id="${id}" class="num" data-value="${value}"${extra}>${fmt(value, digits)}</span>`;
}

// -- router ------------------------------------------------------------------------------------------------
const views = {};
let active = null;

function show(name) {
  if (!views[name]) name = "fingerprint";
  for (const node of document.querySelectorAll(".view")) node.hidden = node.id !== `view-${name}`;
  for (const link of document.querySelectorAll(".tabs a")) link.classList.toggle("active", link.dataset.view === name);
  active = name;
  const view = views[name];
  if (view.stale) { view.stale = false; view.refresh(0); }
}

function invalidateAll() {
  for (const [name, view] of Object.entries(views)) {
    if (!view.usesRope) continue;
    view.stale = true;
  }
  if (active && views[active].stale) { views[active].stale = false; views[active].refresh(); }
}

function register(name, refresh, usesRope = true) {
  views[name] = { refresh, stale: true, usesRope };
}

// -- global settings -----------------------------------------------------------------------------------------
function setupGlobal() {
  const headDim = $("g-head-dim"), baseLog = $("g-base-log"), base = $("g-base");
  headDim.addEventListener("change", () => { rope.headDim = Number(headDim.value); invalidateAll(); });
  baseLog.addEventListener("input", () => {
    rope.base = pow10(Number(baseLog.value));
    base.value = rope.base;
    invalidateAll();
  });
  base.addEventListener("change", () => {
    const value = Number(base.value);
    rope.base = value;
    if (value > 0) baseLog.value = Math.log10(value);
    invalidateAll();
  });
  $("rope-settings").addEventListener("submit", (event) => event.preventDefault());
}

// Lets another view (a model fixture) set the shared RoPE settings.
function setRope(headDim, base) {
  const select = $("g-head-dim");
  if (![...select.options].some((o) => Number(o.value) === headDim)) {
    html("option", {}, select, String(headDim));
  }
  select.value = String(headDim);
  rope.headDim = headDim;
  rope.base = base;
  $("g-base").value = base;
  $("g-base-log").value = Math.log10(base);
}

// == 1. wave fingerprint ====================================================================================
function setupFingerprint() {
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
    canvas.dataset.rows = table.length;
    canvas.dataset.cols = table.d_model;
    canvas.dataset.cell = st.size;
    $("fp-rows").textContent = table.length - 1;
    $("fp-cols").textContent = table.d_model - 1;
    drawSeat();
    drawBarcodes(prints);
    if (st.hover && st.hover.row < table.length && st.hover.col < table.d_model) hoverCell(st.hover, 0);
    else { st.hover = null; cursor.hidden = true; }
  });

  function drawSeat() {
    if (!st.table) return;
    const pos = Math.min(seat(), st.table.length - 1);
    $("fp-seat-label").textContent = pos;
    const row = st.table.table[pos];
    const node = bars($("fp-seat-bars"), row, { height: 110, colour: (v) => `rgb(${diverging(v).join(",")})`,
      domain: [-1, 1], label: `position vector of seat ${pos}` });
    node.dataset.pos = pos;
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
      width: 420, height: 170, title: `column ${col} over positions`,
      x: { domain: [0, Math.max(1, xs.length - 1)], label: `position (column ${col})` },
      y: { domain: [-1.05, 1.05], label: "value" },
      series: [{ name: `column ${col}`, xs, ys: column, color: col % 2 ? COLORS.q : COLORS.sinusoidal, points: true }],
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
  canvas.addEventListener("mousemove", (event) => {
    if (!st.table) return;
    const cell = cellAt(canvas, event, st.size);
    if (cell.row < 0 || cell.col < 0 || cell.row >= st.table.length || cell.col >= st.table.d_model) return;
    if (st.hover && st.hover.row === cell.row && st.hover.col === cell.col) return;
    hoverCell(cell);
  });

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
    const dist = $("fp-dist");
    const top = Math.max(...prints.distances.flat());
    heatmap(dist, prints.distances, (v) => sequential(v / (top || 1)), { maxWidth: 260, maxHeight: 260 });
  }

  $("fp-text").addEventListener("input", () => refresh(200));
  register("fingerprint", refresh, false);
}

// == 2. RoPE clock dials =======================================================================================
function setupDials() {
  const q = slider("dl-q", () => refresh());
  const k = slider("dl-k", () => refresh());
  const offset = slider("dl-offset", () => refresh(20));
  const seed = slider("dl-seed", () => refresh());

  const refresh = loader("dials", async (signal) => {
    const d = await api("/api/rope/dials", { head_dim: rope.headDim, base: rope.base, q_pos: q(), k_pos: k(),
      offset: offset(), seed: seed() }, signal);
    const box = $("dl-dials");
    box.replaceChildren();
    const norms = [...d.q_pairs_moved, ...d.k_pairs_moved].map(([a, b]) => Math.hypot(a, b));
    const top = Math.max(...norms) || 1;
    d.theta.forEach((theta, i) => {
      const [qa, qb] = d.q_pairs_moved[i], [ka, kb] = d.k_pairs_moved[i];
      const qAngle = Math.atan2(qb, qa), kAngle = Math.atan2(kb, ka);
      let between = qAngle - kAngle;
      between = Math.atan2(Math.sin(between), Math.cos(between));
      const holder = html("div", { class: "dial-box", "data-pair": i }, box);
      dial(holder, {
        size: 140,
        hands: [{ angle: kAngle, length: Math.hypot(ka, kb) / top, color: COLORS.k, label: "k" },
          { angle: qAngle, length: Math.hypot(qa, qb) / top, color: COLORS.q, label: "q" }],
        arc: { from: kAngle, to: kAngle + between, color: "#6a51a3" },
        title: `pair ${i} · θ=${fmt(d.theta_deg[i], 2)}°/seat`,
        caption: `q turned ${fmt(d.relative_angle_deg[i], 1)}° more than k`,
      });
      holder.dataset.relativeDeg = d.relative_angle_deg[i];
      holder.title = `pair ${i}: wavelength ${fmt(d.wavelength[i], 1)} positions. Click to find it in the wavelength view.`;
      holder.tabIndex = 0;
      const follow = () => {
        focus.pair = i;
        for (const name of ["wavelengths", "precision"]) views[name].stale = true;
        window.location.hash = "#wavelengths";
      };
      holder.addEventListener("click", follow);
      holder.addEventListener("keydown", (event) => { if (event.key === "Enter") follow(); });
    });
    const mq = d.q_pos + d.offset, mk = d.k_pos + d.offset;
    $("dl-scoreline").innerHTML = `
      score q′·k′ at seats (m, n) = (${d.q_pos}, ${d.k_pos}): ${valueSpan("dl-score", d.score, 9)}
      · moved to (${mq}, ${mk}): ${valueSpan("dl-score-moved", d.score_moved, 9)}
      · difference ${fmt(Math.abs(d.score - d.score_moved), 2)}
      · without RoPE q·k = ${fmt(d.score_unrotated, 6)}`;
    bars($("dl-pair-bars"), d.pair_scores_moved, { height: 120, label: "score per pair",
      colour: (v) => (v >= 0 ? COLORS.q : COLORS.sinusoidal) });
  });

  // the order proof
  const degrees = slider("wo-deg", () => order());
  const order = loader("dials", async (signal) => {
    const d = await api("/api/rope/order", { text_a: $("wo-a").value, text_b: $("wo-b").value,
      query_word: $("wo-q").value.trim(), key_word: $("wo-k").value.trim(), degrees: degrees() }, signal);
    const box = $("wo-clocks");
    box.replaceChildren();
    d.sentences.forEach((s, which) => {
      const holder = html("div", { class: "dial-box wide", "data-sentence": which }, box);
      const rad = (deg) => (deg * Math.PI) / 180;
      const hands = s.words.map((w, i) => ({
        angle: rad(s.seat_angles_deg[i]), length: i === s.query_seat || i === s.key_seat ? 0.92 : 0.55,
        color: i === s.query_seat ? COLORS.q : i === s.key_seat ? COLORS.k : "#b9b9b9",
        width: i === s.query_seat || i === s.key_seat ? 3.5 : 2,
        label: i === s.query_seat || i === s.key_seat ? w : "",
      }));
      dial(holder, {
        size: 200, hands, ticks: Math.round(360 / d.degrees),
        arc: { from: rad(s.seat_angles_deg[s.query_seat]), to: rad(s.seat_angles_deg[s.query_seat] + s.relative_angle_deg),
          color: "#6a51a3" },
        title: `${which ? "B" : "A"}: “${s.text}”`,
        caption: s.words.map((w, i) => `${i}:${w}`).join(" "),
      });
    });
    const [a, b] = d.sentences;
    const line = (s, id, tag) => `<p><b>${tag}</b> “${escapeText(s.text)}”: “${escapeText(d.query_word)}” sits at seat
      ${s.query_seat} (${fmt(s.seat_angles_deg[s.query_seat], 0)}°), “${escapeText(d.key_word)}” at seat ${s.key_seat}
      (${fmt(s.seat_angles_deg[s.key_seat], 0)}°): the key is
      ${s.relative_angle_deg > 0 ? "+" : ""}${valueSpan(`${id}-rel`, s.relative_angle_deg, 1)}° from the query.
      RoPE score ${valueSpan(`${id}-rope`, s.score_rope, 6)}.</p>`;
    $("wo-proof").innerHTML = `${line(a, "wo-a", "A")}${line(b, "wo-b", "B")}
      <p>Without positions both sentences give the score ${valueSpan("wo-nope", a.score_nope, 6)}
      (the same two vectors). With RoPE the relative angle goes from ${a.relative_angle_deg > 0 ? "+" : ""}${fmt(a.relative_angle_deg, 0)}° to
      ${b.relative_angle_deg > 0 ? "+" : ""}${fmt(b.relative_angle_deg, 0)}°, and the scores differ by ${fmt(Math.abs(a.score_rope - b.score_rope), 4)}:
      attention can tell who bit whom.</p>`;
  }, { selector: ".wo-error" });
  for (const id of ["wo-a", "wo-b", "wo-q", "wo-k"]) $(id).addEventListener("input", () => order(250));
  $("wo-proof-btn").addEventListener("click", () => {
    const proof = $("wo-proof");
    proof.hidden = !proof.hidden;
    $("wo-proof-btn").setAttribute("aria-expanded", String(!proof.hidden));
    $("wo-proof-btn").textContent = proof.hidden ? "See the proof" : "Hide the proof";
  });
  register("dials", (wait) => { refresh(wait); order(wait); });
}

// == 3. score vs distance =========================================================================================
function setupScores() {
  let data = null;
  const maxD = slider("sc-max", (v) => { $("sc-at").max = v; refresh(); });
  const dModel = slider("sc-dmodel", () => refresh());
  const heads = slider("sc-heads", () => refresh());
  const at = slider("sc-at", () => draw());

  const refresh = loader("scores", async (signal) => {
    data = await api("/api/scores", { head_dim: rope.headDim, base: rope.base, d_model: dModel(),
      sin_base: 10000, heads: heads(), max_distance: maxD() }, signal);
    draw();
  });

  function draw() {
    if (!data) return;
    const d = Math.min(at(), data.max_distance);
    lineChart($("sc-chart"), {
      width: 600, height: 300, title: "score against distance",
      x: { domain: [0, data.max_distance], label: "relative distance d (seats)" },
      y: { domain: extent([data.rope, data.sinusoidal]), label: "normalised score" },
      series: [
        { name: `RoPE (head_dim ${data.head_dim}, base ${fmt(data.base, 0)})`, xs: data.distances, ys: data.rope, color: COLORS.rope },
        { name: `sinusoidal (d_model ${data.d_model}, base 10000)`, xs: data.distances, ys: data.sinusoidal, color: COLORS.sinusoidal, dash: "6 3" },
      ],
      hlines: [{ y: 0, color: "#999", dash: "2 3" }],
      vlines: [{ x: d, color: "#333", label: `d = ${d}` }],
      onHover: (x) => { const v = Math.max(0, Math.min(data.max_distance, Math.round(x))); $("sc-at").value = v; $("sc-at-out").textContent = v; readout(v); return v; },
    });
    lineChart($("sc-alibi"), {
      width: 600, height: 300, title: "ALiBi bias against distance",
      x: { domain: [0, data.max_distance], label: "relative distance d (seats)" },
      y: { domain: extent(data.alibi), label: "bias added to the logit" },
      series: data.alibi.map((row, h) => ({ name: `head ${h} (slope ${fmt(data.alibi_slopes[h], 4)})`, xs: data.distances,
        ys: row, color: PALETTE[h % PALETTE.length] })),
      vlines: [{ x: d, color: "#333" }],
    });
    readout(d);
  }

  function readout(d) {
    $("sc-readout").innerHTML = `At distance ${d}: RoPE ${valueSpan("sc-rope-at", data.rope[d], 6, ` data-d="${d}"`)}
      · sinusoidal ${valueSpan("sc-sin-at", data.sinusoidal[d], 6)}
      · ALiBi head 0 ${valueSpan("sc-alibi-at", data.alibi[0][d], 4)}, head ${data.heads - 1}
      ${fmt(data.alibi[data.heads - 1][d], 4)}`;
  }
  register("scores", refresh);
}

// == 4. wavelengths and scalings ===================================================================================
function setupWavelengths() {
  const train = slider("wl-train-log", (v) => { scaling.trainLen = v; changed(); }, pow2, fmtInt);
  const factor = slider("wl-factor", (v) => { scaling.factor = v; changed(); });
  const seqLen = slider("wl-seq-log", (v) => { scaling.seqLen = v; changed(); }, pow2, fmtInt);
  const betaFast = slider("wl-beta-fast", (v) => { scaling.betaFast = v; changed(); });
  const betaSlow = slider("wl-beta-slow", (v) => { scaling.betaSlow = v; changed(); });
  const low = slider("wl-low", (v) => { scaling.low = v; changed(); });
  const high = slider("wl-high", (v) => { scaling.high = v; changed(); });
  Object.assign(scaling, { trainLen: train(), factor: factor(), seqLen: seqLen(), betaFast: betaFast(),
    betaSlow: betaSlow(), low: low(), high: high() });
  const fixtureSelect = $("wl-fixture");

  function changed() {
    if (views.config) views.config.stale = true;
    refresh();
  }

  const methods = () => [...$("wl-methods").querySelectorAll("input:checked")].map((i) => i.value);
  $("wl-methods").addEventListener("change", () => refresh());
  fixtureSelect.addEventListener("change", () => refresh(0));

  const refresh = loader("wavelengths", async (signal) => {
    const name = fixtureSelect.value;
    $("wl-methods").disabled = Boolean(name);
    if (name) {
      const f = await api("/api/fixture", { name }, signal);
      drawFixture(f);
      return;
    }
    const d = await api("/api/wavelengths", { rotary_dim: rope.headDim, base: rope.base,
      train_len: scaling.trainLen, methods: methods().join(","), factor: scaling.factor, seq_len: scaling.seqLen,
      beta_fast: scaling.betaFast, beta_slow: scaling.betaSlow, low_freq_factor: scaling.low,
      high_freq_factor: scaling.high }, signal);
    drawSettings(d);
  });

  function chart(pairs, series, hlines, bands) {
    const all = series.map((s) => s.ys).concat([hlines.map((h) => h.y)]);
    const readout = (i) => {
      $("wl-readout").innerHTML = `pair ${i}: ` + series.map((s) =>
        `${escapeText(s.name)} <span class="num" data-series="${escapeText(s.name)}" data-value="${s.ys[i]}">${s.ys[i] === null ? "no rotation" : fmt(s.ys[i], 1)}</span>`).join(" · ");
      $("wl-readout").dataset.pair = i;
    };
    const marked = focus.pair !== null && focus.pair < pairs.length;
    lineChart($("wl-chart"), {
      width: 860, height: 380, title: "wavelength per pair",
      x: { domain: [0, Math.max(1, pairs.length - 1)], label: "rotation pair i (fast → slow)" },
      y: { domain: extent(all, { positiveOnly: true }), log: true, label: "wavelength (positions, log)" },
      series, hlines, bands,
      vlines: marked ? [{ x: focus.pair, color: "#6a51a3", label: `pair ${focus.pair} (from the dials)` }] : [],
      onHover: (x) => { const i = Math.max(0, Math.min(pairs.length - 1, Math.round(x))); readout(i); return i; },
    });
    readout(marked ? focus.pair : 0);
  }

  function drawSettings(d) {
    const series = [{ name: "no scaling", xs: d.pairs, ys: d.default.wavelength, color: COLORS.default, width: 2.5, points: d.pairs.length <= 32 }];
    const bands = [], hlines = [
      { y: d.train_len, label: `trained context ${fmtInt(d.train_len)}`, color: "#333" },
      { y: d.extended_len, label: `target ${fmtInt(d.extended_len)} (× ${d.factor})`, color: "#777", dash: "2 3" },
    ];
    for (const [name, m] of Object.entries(d.methods)) {
      series.push({ name: `${name}${name === "dynamic" ? ` at length ${fmtInt(d.seq_len)}` : ""}`, xs: d.pairs, ys: m.wavelength,
        color: COLORS[name], dash: name === "linear" ? "7 4" : undefined });
      if ((name === "yarn" || name === "llama3") && m.ramp) {
        bands.push({ x0: m.ramp[0] - 0.5, x1: m.ramp[1] + 0.5, color: COLORS[name], label: `${name} ramp` });
      }
    }
    for (const [name, [a, b]] of Object.entries(d.thresholds)) {
      hlines.push({ y: a, color: COLORS[name], dash: "1 3", left: true, label: `${name}: keep below ${fmt(a, 0)}` });
      hlines.push({ y: b, color: COLORS[name], dash: "1 3", left: true, label: `${name}: divide above ${fmt(b, 0)}` });
    }
    chart(d.pairs, series, hlines, bands);
    $("wl-caption").textContent = `${d.full_turns_in_training} of ${d.pairs.length} pairs complete a full turn inside the trained context of ${fmtInt(d.train_len)}. ` +
      "Shaded: pairs a ramp blends between keeping θ and dividing it by the factor.";
    const rows = Object.entries(d.methods).map(([name, m]) => `<tr data-method="${name}"><td>${name}</td>
      <td class="num" data-kept="${m.kept}">${m.kept}</td><td class="num">${m.blended}</td><td class="num">${m.divided}</td>
      <td class="num">${fmt(m.attention_factor, 4)}</td><td><code>${escapeText(JSON.stringify(m.config))}</code></td></tr>`);
    $("wl-table").innerHTML = `<thead><tr><th>method</th><th>pairs kept</th><th>blended</th><th>divided by factor</th>
      <th>attention factor</th><th>config</th></tr></thead><tbody>${rows.join("") || '<tr><td colspan="6">no overlay selected</td></tr>'}</tbody>`;
    $("wl-fixture-fields").hidden = true;
  }

  function drawFixture(f) {
    const series = [{ name: `${f.name}: rope_theta ${fmt(f.base, 0)}, no scaling`, xs: f.pairs, ys: f.default.wavelength,
      color: COLORS.default, width: 2.5 }];
    const curveNames = { configured: `${f.rope_type} as configured`, at_max_position_embeddings: `${f.rope_type} at ${fmtInt(f.max_position_embeddings)} tokens` };
    const bands = [];
    Object.entries(f.curves).forEach(([key, c], i) => {
      series.push({ name: curveNames[key] || key, xs: f.pairs, ys: c.wavelength, color: COLORS[f.rope_type] || PALETTE[i], dash: i ? "6 3" : undefined });
      if (key === "configured" && c.ramp && (f.rope_type === "yarn" || f.rope_type === "llama3")) {
        bands.push({ x0: c.ramp[0] - 0.5, x1: c.ramp[1] + 0.5, color: COLORS[f.rope_type], label: `${f.rope_type} ramp` });
      }
    });
    const hlines = [{ y: f.train_len, label: `trained context ${fmtInt(f.train_len)}`, color: "#333" }];
    if (f.max_position_embeddings !== f.train_len) hlines.push({ y: f.max_position_embeddings, color: "#777", dash: "2 3",
      label: `max_position_embeddings ${fmtInt(f.max_position_embeddings)}` });
    chart(f.pairs, series, hlines, bands);
    const c = f.curves.configured;
    $("wl-caption").textContent = `${f.name} (${f.model_type}): head_dim ${f.head_dim}, ${f.rotary_dim} rotated features, ` +
      `layout ${f.layout}; ${c.kept} pairs kept, ${c.blended} blended, ${c.divided} divided by the factor.`;
    $("wl-table").innerHTML = `<thead><tr><th>fixture</th><th>rope type</th><th>rope_theta</th><th>rotary_dim</th>
      <th>factor</th><th>attention factor</th></tr></thead><tbody><tr data-fixture="${escapeText(f.name)}"><td>${escapeText(f.name)}</td>
      <td>${f.rope_type}</td><td class="num">${fmt(f.base, 0)}</td><td class="num">${f.rotary_dim}</td>
      <td class="num">${f.factor === null ? "–" : fmt(f.factor, 2)}</td><td class="num">${fmt(c.attention_factor, 4)}</td></tr></tbody>`;
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
  register("wavelengths", refresh);
}

// == 5. ALiBi vs RoPE ==============================================================================================
function setupAlibi() {
  const st = { data: null, biasSize: 1, ropeSize: 1 };
  const heads = slider("al-heads", (v) => {
    const head = $("al-head");
    head.max = v - 1;
    if (Number(head.value) > v - 1) { head.value = v - 1; $("al-head-out").textContent = v - 1; }
    refresh();
  });
  const head = slider("al-head", () => refresh());
  const len = slider("al-len", () => refresh());
  const seed = slider("al-seed", () => refresh());

  const refresh = loader("alibi", async (signal) => {
    const d = await api("/api/alibi", { heads: heads(), head: Math.min(head(), heads() - 1), matrix_len: len(),
      head_dim: rope.headDim, base: rope.base, seed: seed() }, signal);
    st.data = d;
    const low = Math.min(...d.bias.flat().filter((v) => v !== null));
    st.biasSize = heatmap($("al-bias"), d.bias, (v) => sequential(low ? v / low : 0), { maxWidth: 300, maxHeight: 300 });
    const top = Math.max(...d.rope_scores.flat().filter((v) => v !== null).map(Math.abs)) || 1;
    st.ropeSize = heatmap($("al-rope"), d.rope_scores, (v) => diverging(v / top), { maxWidth: 300, maxHeight: 300 });
    $("al-head-label").textContent = d.head;
    $("al-slope").innerHTML = `${valueSpan("al-slope-value", d.slopes[d.head], 6)} = 2<sup>${fmt(d.slopes_log2[d.head], 2)}</sup>`;
    bars($("al-slopes"), d.slopes, { width: 300, height: 200, log: true, highlight: d.head, label: "ALiBi slopes",
      colour: (v, i) => (i === d.head ? COLORS.k : "#4c78a8") });
  });

  function hover(canvasId, outId, key, sizeKey, what) {
    $(canvasId).addEventListener("mousemove", (event) => {
      if (!st.data) return;
      const { row, col } = cellAt($(canvasId), event, st[sizeKey]);
      const m = st.data[key];
      if (row < 0 || col < 0 || row >= m.length || col >= m.length) return;
      const v = m[row][col];
      $(outId).textContent = `query ${row}, key ${col} (distance ${row - col}): ${v === null ? "masked (future key)" : `${what} ${fmt(v, 5)}`}`;
    });
  }
  hover("al-bias", "al-bias-hover", "bias", "biasSize", "bias");
  hover("al-rope", "al-rope-hover", "rope_scores", "ropeSize", "score");
  register("alibi", refresh);
}

// == 6. precision ===================================================================================================
function setupPrecision() {
  const maxPos = slider("pr-max-log", () => refresh(), pow2, fmtInt);
  const pos = slider("pr-pos-log", () => refresh(), (v) => Math.min(2 ** 31, Math.round(10 ** v)), fmtInt);
  const FLOOR = 1e-12;
  const floor = (arr) => arr.map((v) => (v === null ? null : Math.max(v, FLOOR)));

  const refresh = loader("precision", async (signal) => {
    const d = await api("/api/precision", { head_dim: rope.headDim, base: rope.base, max_position: maxPos(),
      pos: pos() }, signal);
    const names = ["bfloat16", "float16", "float32", "posenc"];
    const label = { bfloat16: "bfloat16 (pos·θ in bf16)", float16: "float16 (pos·θ in fp16)",
      float32: "float32 (pos·θ in fp32)", posenc: "posenc float32 tables" };
    lineChart($("pr-chart"), {
      width: 560, height: 320, title: "angle error against position",
      x: { domain: [1, d.max_position], log: true, label: "position (log)" },
      y: { domain: [FLOOR, 10], log: true, label: "worst angle error (rad)" },
      series: names.map((n) => ({ name: label[n], xs: d.positions, ys: floor(d.max_error[n]), color: COLORS[n],
        width: n === "posenc" ? 3 : 2 })),
      vlines: d.pos <= d.max_position && d.pos >= 1 ? [{ x: d.pos, color: "#333", label: `pos ${fmtInt(d.pos)}` }] : [],
    });
    const pairs = d.theta.map((_, i) => i);
    lineChart($("pr-pairs"), {
      width: 560, height: 320, title: "angle error per pair",
      x: { domain: [0, Math.max(1, pairs.length - 1)], label: "rotation pair i (fast → slow)" },
      y: { domain: [FLOOR, 10], log: true, label: `angle error at ${fmtInt(d.pos)} (rad)` },
      series: names.map((n) => ({ name: label[n], xs: pairs, ys: floor(d.at_pos[n]), color: COLORS[n], points: true })),
      vlines: focus.pair !== null && focus.pair < pairs.length ? [{ x: focus.pair, color: "#6a51a3", label: `pair ${focus.pair}` }] : [],
      legend: false,
    });
    const worst = (n) => { const v = d.at_pos[n]; return v.some((x) => x === null) ? null : Math.max(...v); };
    $("pr-readout").innerHTML = `At position ${fmtInt(d.pos)}, worst pair: bfloat16 ${valueSpan("pr-bf16", worst("bfloat16"), 4)} rad
      · float16 ${worst("float16") === null ? '<span id="pr-fp16" class="num" data-value="overflow">overflow (past 65504)</span>' : valueSpan("pr-fp16", worst("float16"), 4)}
      · float32 ${valueSpan("pr-fp32", worst("float32"), 4)} rad · posenc ${valueSpan("pr-posenc", worst("posenc"), 2)} rad`;
  });
  register("precision", refresh);
}

// == 7. lab results ==================================================================================================
function setupLab() {
  let data = null;
  const select = $("lab-length");
  select.addEventListener("change", () => draw());
  const points = slider("lab-points", () => refresh());

  const refresh = loader("lab", async (signal) => {
    const keep = select.value;
    data = await api("/api/lab", { points: points() }, signal);
    const notes = $("lab-notes");
    notes.replaceChildren();
    for (const note of data.notes || []) html("li", {}, notes, note);
    $("lab-body").hidden = !data.available;
    if (!data.available) return;
    const lengths = new Set();
    for (const s of Object.values(data.schemes)) for (const l of Object.keys(s.loss_by_position)) lengths.add(Number(l));
    select.replaceChildren();
    for (const l of [...lengths].sort((a, b) => a - b)) html("option", { value: l }, select, fmtInt(l));
    if (select.options.length) {
      select.value = [...select.options].some((o) => o.value === keep) ? keep : select.options[select.options.length - 1].value;
    }
    draw();
    tables();
  });

  function draw() {
    if (!data || !data.available) return;
    const length = select.value;
    const series = Object.entries(data.schemes).filter(([, s]) => s.loss_by_position[length]).map(([name, s], i) => ({
      name, xs: s.loss_by_position[length].positions, ys: s.loss_by_position[length].loss, color: PALETTE[i % PALETTE.length] }));
    if (!series.length) { $("lab-chart").textContent = `No loss-by-position curves for length ${length}.`; return; }
    const maxX = Math.max(...series.map((s) => s.xs[s.xs.length - 1] || 1));
    lineChart($("lab-chart"), {
      width: 860, height: 340, title: "loss against position",
      x: { domain: [0, Math.max(1, maxX)], label: "position in the evaluation text" },
      y: { domain: extent(series.map((s) => s.ys)), label: "bits per byte" },
      series, vlines: data.train_len ? [{ x: data.train_len, label: `trained on ${fmtInt(data.train_len)}`, color: "#333" }] : [],
    });
  }

  function table(node, entries, lengths, label) {
    const head = `<thead><tr><th>${label}</th>${lengths.map((l) => `<th>${fmtInt(l)}${data.train_len && l > data.train_len ? " ›" : ""}</th>`).join("")}</tr></thead>`;
    const body = entries.map(([name, rows]) => `<tr><td>${escapeText(name)}</td>${lengths.map((l) => {
      const r = rows[String(l)];
      const note = r && r.note ? ` title="${escapeText(r.note)}"` : "";
      if (r && r.cannot) return `<td class="num missing"${note}>cannot</td>`;
      if (!r || r.bpb === null || r.bpb === undefined) return '<td class="num missing">–</td>';
      const ci = r.bpb_ci && r.bpb_ci[0] !== null ? ` <small>[${fmt(r.bpb_ci[0], 3)}, ${fmt(r.bpb_ci[1], 3)}]</small>` : "";
      const ft = r.finetuned_bpb !== null && r.finetuned_bpb !== undefined ? `<br><small>ft ${fmt(r.finetuned_bpb, 3)}</small>` : "";
      const mark = r.note && r.note.includes("interpolated") ? " †" : "";
      return `<td class="num" data-bpb="${r.bpb}"${note}>${fmt(r.bpb, 3)}${mark}${ci}${ft}</td>`;
    }).join("")}</tr>`).join("");
    node.innerHTML = head + `<tbody>${body || `<tr><td colspan="${lengths.length + 1}">none</td></tr>`}</tbody>`;
  }

  function tables() {
    $("lab-status").textContent = `run ${data.run}: trained on ${data.train_len ? fmtInt(data.train_len) : "?"} bytes, ` +
      `evaluated at ${data.eval_lengths.map(fmtInt).join(", ") || "no lengths yet"}` +
      (data.complete === false ? " (still running: results so far)" : data.complete ? " (complete)" : "");
    const verdicts = $("lab-verdicts");
    verdicts.replaceChildren();
    for (const v of data.verdicts || []) {
      const item = html("li", { class: v.seen === true ? "seen" : v.seen === false ? "not-seen" : "unknown" }, verdicts);
      html("b", {}, item, `${v.seen === true ? "seen" : v.seen === false ? "not seen" : "not measured"}: `);
      item.appendChild(document.createTextNode(`${v.claim} (${v.evidence})`));
    }
    if (!verdicts.childElementCount) html("li", {}, verdicts, "no verdicts in this results file");
    const lengths = data.eval_lengths.length ? data.eval_lengths : [];
    table($("lab-eval"), Object.entries(data.schemes).map(([n, s]) => [n, s.eval]), lengths, "scheme");
    table($("lab-ext"), Object.entries(data.extension || {}), lengths, "method");
  }
  register("lab", refresh, false);
}

// == 8. knowledge checks ================================================================================================
function setupQuiz() {
  const results = {};
  const refresh = loader("quiz", async (signal) => {
    if ($("quiz-list").childElementCount) return;
    const { checks } = await api("/api/quiz", {}, signal);
    const list = $("quiz-list");
    checks.forEach((check, n) => {
      const card = html("article", { class: "quiz-card", id: `quiz-${check.id}`, "data-check": check.id }, list);
      html("h3", {}, card, `${n + 1}. ${check.topic}`);
      html("p", { class: "prompt" }, card, check.prompt);
      const choices = html("div", { class: "choices" }, card);
      const feedback = html("div", { class: "feedback", id: `quiz-${check.id}-feedback`, "aria-live": "polite" }, card);
      feedback.hidden = true;
      check.choices.forEach((text, i) => {
        const button = html("button", { type: "button", class: "choice", "data-choice": i }, choices, `${"ABCDE"[i]}) ${text}`);
        button.addEventListener("click", () => answer(check, i, card, feedback));
      });
    });
    score();
  });

  async function answer(check, choice, card, feedback) {
    try {
      const r = await api(`/api/quiz/${encodeURIComponent(check.id)}/answer`, { choice });
      for (const b of card.querySelectorAll(".choice")) {
        const i = Number(b.dataset.choice);
        b.classList.toggle("picked", i === choice);
        b.classList.toggle("right", i === r.answer);
        b.classList.toggle("wrong", i === choice && !r.correct);
      }
      feedback.className = `feedback ${r.correct ? "correct" : "incorrect"}`;
      feedback.dataset.correct = String(r.correct);
      feedback.innerHTML = `<p class="verdict">${r.correct ? "✓ Correct." : "✗ Not quite."} ${escapeText(r.feedback)}</p>
        ${r.correct ? "" : `<p>${escapeText(r.explanation)}</p>`}
        <div class="evidence"><span class="muted">computed now by posenc:</span>
        <ul>${r.evidence.map((line) => `<li>${escapeText(line)}</li>`).join("")}</ul></div>`;
      feedback.hidden = false;
      if (!(check.id in results)) results[check.id] = r.correct;
      score();
      clearError("quiz");
      rendered("quiz");
    } catch (err) { showError("quiz", err.message); }
  }

  function score() {
    const total = $("quiz-list").childElementCount, tried = Object.keys(results).length;
    const right = Object.values(results).filter(Boolean).length;
    $("quiz-score").textContent = `${tried} of ${total} answered, ${right} right at the first try.`;
  }
  register("quiz", refresh, false);
}

// == 9. copy as config =====================================================================================================
function setupConfig() {
  const refresh = loader("config", async (signal) => {
    const frac = Number($("cf-rotary").value);
    const rotary = Math.max(2, 2 * Math.round((rope.headDim * frac) / 2));
    const d = await api("/api/config", { head_dim: rope.headDim, rotary_dim: rotary, base: rope.base,
      layout: $("cf-layout").value, method: $("cf-method").value, max_position_embeddings: $("cf-max").value,
      factor: scaling.factor, original_max_position_embeddings: scaling.trainLen, beta_fast: scaling.betaFast,
      beta_slow: scaling.betaSlow, low_freq_factor: scaling.low, high_freq_factor: scaling.high }, signal);
    $("cf-python").textContent = d.python;
    $("cf-hf-new").textContent = JSON.stringify(d.hf_rope_parameters, null, 2);
    $("cf-hf-old").textContent = JSON.stringify(d.hf_rope_scaling, null, 2);
    $("cf-python").dataset.config = JSON.stringify(d.posenc);
    $("cf-note").textContent = `attention factor on the cos/sin tables: ${fmt(d.attention_factor, 6)}. ` +
      (d.posenc.layout === "interleaved" ? "config.json has no layout field: Hugging Face checkpoints are half-split; " +
        "interleaved weights need posenc.permute_for_half_split first." : "");
  });
  for (const id of ["cf-method", "cf-rotary", "cf-layout", "cf-max"]) $(id).addEventListener("change", () => refresh());
  for (const button of document.querySelectorAll("button.copy")) {
    button.addEventListener("click", async () => {
      const text = $(button.dataset.target).textContent;
      try {
        await navigator.clipboard.writeText(text);
        button.textContent = "Copied";
      } catch (err) {
        const range = document.createRange();
        range.selectNodeContents($(button.dataset.target));
        const sel = window.getSelection();
        sel.removeAllRanges();
        sel.addRange(range);
        button.textContent = "Selected: press Ctrl+C";
      }
      setTimeout(() => { button.textContent = "Copy"; }, 1500);
    });
  }
  register("config", refresh);
}

// -- start ------------------------------------------------------------------------------------------------------
setupGlobal();
setupFingerprint();
setupDials();
setupScores();
setupWavelengths();
setupAlibi();
setupPrecision();
setupLab();
setupQuiz();
setupConfig();
window.addEventListener("hashchange", () => show(window.location.hash.slice(1)));
show(window.location.hash.slice(1) || "fingerprint");
document.body.dataset.ready = "true";
