// RoPE, turn, don't add: the 2x2 matrix, ghost-hand dials, the relative-angle proof, who bit whom.
// Angles are positive counter-clockwise everywhere, as the matrix turns them.

import { $, figureHtml, figures, inputHtml, proseHtml, sliderHtml } from "../../core.js";
import { svg, html, fmt, widthOf, root, text, clock, rad, mod360, signed, numbers, stackLabels } from "../../charts.js";
import { PAL, SCHEME_COLOURS, INK, MUTED, textColour } from "../../palette.js";

// The chapter's article under its kicker and heading (the page writes those from the manifest): its
// figures, controls and error box, and the data-prose places its text fills (posenc.teaching.lesson.chapters).
export const markup = [
  proseHtml("intro"),
  figureHtml("rot", {
    controls: [
      sliderHtml("seat m", "rot-seat", { min: 0, max: 12, value: 1, primary: true }),
      sliderHtml("θ per seat (degrees)", "rot-theta", { min: -90, max: 90, value: 30 }),
      inputHtml("a", { type: "number", id: "rot-a", min: -10, max: 10, step: 0.05, value: 1 }),
      inputHtml("b", { type: "number", id: "rot-b", min: -10, max: 10, step: 0.05, value: 0.5 }),
    ],
    error: true,
    body: `<div class="rot-layout">
  <div id="rot-plane" class="fig-box plane-box"></div>
  <div id="rot-matrix" class="matrix-box"></div>
</div>`,
  }),
  `<aside class="sign-note" id="sign-note" data-prose="sign"></aside>`,
  proseHtml("dials"),
  figureHtml("rope", {
    before: proseHtml("dials-try"),
    controls: [
      sliderHtml("query seat m", "rope-m", { min: 0, max: 40, value: 3 }),
      sliderHtml("key seat n", "rope-n", { min: 0, max: 40, value: 1 }),
      sliderHtml("move both by", "rope-shift", { min: 0, max: 500, value: 100 }),
    ],
    body: `<div id="rope-dials" class="dials-row"></div>
<p class="score-readout">score q′·k′ of the hands above: <output id="rope-score">…</output>
  (gap m − n = <output id="rope-gap">…</output>)</p>`,
    numbers: true,
  }),
  proseHtml("gap"),
  `<div class="proof-box" id="rope-proof"></div>`,
  proseHtml("pairs"),
  figureHtml("pairs", {
    body: `<div id="pairs-figure" class="fig-box"></div>`,
    after: `<div class="table-wrap"><table class="data" id="pairs-table"></table></div>`, numbers: true,
  }),
  proseHtml("order"),
  figureHtml("order", {
    controls: [
      `<button type="button" id="order-rotate" class="primary" aria-pressed="false">Show sentence B: the man bit dog</button>`,
      sliderHtml("degrees per seat", "order-deg", { min: 5, max: 90, value: 30 }),
    ],
    body: `<div id="order-figure" class="fig-box"></div>
<p class="score-readout">turn from “dog” to “bit”: <output id="order-turn">…</output></p>`,
    numbers: true,
  }),
  proseHtml("after", "measured"),
  `<div class="inline-checks" data-checks="relative qk-only"></div>`,
  `<div data-prose="see-also"></div>`,
].join("\n");

// The dash of pair p's arc in the half-split and interleaved picture (solid, dashed, dotted, dash-dot).
const PAIR_DASHES = [null, "6 3", "2 3", "9 3 2 3"];

// The drawn part of a turn: the angle itself, folded into one turn (the sign kept).
function folded(degrees) { return Math.sign(degrees) * (Math.abs(degrees) % 360); }

export function setup() {
  const vec = { a: 1, b: 0.5 };
  let sentence = 0;

  // the plane with the draggable vector
  const drawPlane = (rot) => {
    const holder = $("rot-plane"), size = widthOf(holder);   // .plane-box has the plane's natural size
    const s = root(holder, size, size, `the vector (${fmt(rot.a, 2)}, ${fmt(rot.b, 2)}) turned by ${fmt(rot.angle_deg, 1)} degrees`);
    s.setAttribute("role", "group");                 // it holds a control, so it cannot be a plain image
    const reach = Math.max(1.25, rot.length * 1.2), c = size / 2, unit = (size / 2 - 16) / reach;
    const px = (x) => c + x * unit, py = (y) => c - y * unit;
    svg("line", { x1: 4, x2: size - 4, y1: c, y2: c, stroke: "#b9bec8" }, s);
    svg("line", { x1: c, x2: c, y1: 4, y2: size - 4, stroke: "#b9bec8" }, s);
    svg("circle", { cx: c, cy: c, r: rot.length * unit, fill: "none", stroke: "#d5d9e0", "stroke-dasharray": "3 3" }, s);
    text(s, size - 6, c - 6, "a", { size: 12, anchor: "end", color: MUTED });
    text(s, c + 6, 16, "b", { size: 12, color: MUTED });
    const from = Math.atan2(rot.b, rot.a), sweep = rad(folded(rot.angle_deg));
    if (Math.abs(sweep) > 1e-9) {
      const rr = Math.min(36, rot.length * unit * 0.6), end = from + sweep;
      const large = Math.abs(sweep) > Math.PI ? 1 : 0, dir = sweep > 0 ? 0 : 1;
      svg("path", { d: `M${c},${c} L${c + Math.cos(from) * rr},${c - Math.sin(from) * rr} A${rr},${rr} 0 ${large} ${dir} ` +
        `${c + Math.cos(end) * rr},${c - Math.sin(end) * rr} Z`, fill: SCHEME_COLOURS.rope, "fill-opacity": 0.3,
        stroke: SCHEME_COLOURS.rope, class: "turn-arc" }, s);
    }
    svg("line", { x1: c, y1: c, x2: px(rot.a), y2: py(rot.b), stroke: "#6b7280", "stroke-width": 2.5, "stroke-dasharray": "5 4",
      class: "ghost-hand" }, s);
    const [ra, rb] = rot.rotated;
    svg("line", { x1: c, y1: c, x2: px(ra), y2: py(rb), stroke: SCHEME_COLOURS.rope, "stroke-width": 3.5, "stroke-linecap": "round", class: "hand" }, s);
    text(s, px(ra) + (ra >= 0 ? 6 : -6), py(rb) - 6, "after", { size: 12, anchor: ra >= 0 ? "start" : "end", color: textColour(SCHEME_COLOURS.rope), weight: 700 });
    const handle = svg("circle", { cx: px(rot.a), cy: py(rot.b), r: 11, fill: "#6b7280", "fill-opacity": 0.35, stroke: INK,
      "stroke-width": 1.5, tabindex: 0, role: "slider", class: "drag-handle", "aria-label": "the vector before the turn",
      "aria-valuemin": -180, "aria-valuemax": 180, "aria-valuenow": Math.round((from * 180) / Math.PI),
      "aria-valuetext": `a = ${fmt(rot.a, 2)}, b = ${fmt(rot.b, 2)}; arrow keys move it` }, s);
    const toValue = (event) => {
      // the plane is redrawn while a drag goes on: measure the one on the page now, not this one
      const box = ($("rot-plane").querySelector("svg") || s).getBoundingClientRect();
      const x = ((event.clientX - box.left) / box.width) * size, y = ((event.clientY - box.top) / box.height) * size;
      const clip = (v) => Math.max(-10, Math.min(10, Math.round(v * 20) / 20));
      setVector(clip((x - c) / unit), clip((c - y) / unit));
    };
    handle.addEventListener("pointerdown", (event) => {
      event.preventDefault();
      const move = (e) => toValue(e);
      const up = () => { window.removeEventListener("pointermove", move); window.removeEventListener("pointerup", up); };
      window.addEventListener("pointermove", move);
      window.addEventListener("pointerup", up);
    });
    s.addEventListener("click", (event) => { if (event.target === s) toValue(event); });
    handle.addEventListener("keydown", (event) => {
      const steps = { ArrowLeft: [-0.1, 0], ArrowRight: [0.1, 0], ArrowUp: [0, 0.1], ArrowDown: [0, -0.1] };
      if (!steps[event.key]) return;
      event.preventDefault();
      const [da, db] = steps[event.key];
      setVector(Math.round((vec.a + da) * 100) / 100, Math.round((vec.b + db) * 100) / 100, true);
    });
  };
  function setVector(a, b, keepFocus = false) {
    vec.a = Math.max(-10, Math.min(10, a));
    vec.b = Math.max(-10, Math.min(10, b));
    $("rot-a").value = String(vec.a);
    $("rot-b").value = String(vec.b);
    refocus = keepFocus;
    plane.load(20);
  }
  let refocus = false;
  const fillRot = (rot) => {
    if (refocus) { const h = $("rot-plane").querySelector(".drag-handle"); if (h) h.focus(); refocus = false; }
    const [[c0, c1], [s0, s1]] = rot.matrix, [ra, rb] = rot.rotated;
    const box = $("rot-matrix");
    box.replaceChildren();
    html("p", {}, box, `m·θ = ${rot.seat} × ${fmt(rot.theta_deg, 0)}° = ${fmt(rot.angle_deg, 1)}°`);
    const table = html("table", { class: "matrix", "aria-label": "the rotation matrix times the vector" }, box);
    const row = (cells) => { const tr = html("tr", {}, table); cells.forEach((t) => html("td", {}, tr, t)); };
    row([fmt(c0, 3), fmt(c1, 3), "×", fmt(rot.a, 2), "=", fmt(ra, 3)]);
    row([fmt(s0, 3), fmt(s1, 3), "", fmt(rot.b, 2), "", fmt(rb, 3)]);
    html("p", {}, box, `a′ = a·cos − b·sin = ${fmt(rot.a, 2)}×${fmt(c0, 3)} − ${fmt(rot.b, 2)}×${fmt(s0, 3)} = ${fmt(ra, 4)}`);
    html("p", {}, box, `b′ = a·sin + b·cos = ${fmt(rot.a, 2)}×${fmt(s0, 3)} + ${fmt(rot.b, 2)}×${fmt(c0, 3)} = ${fmt(rb, 4)}`);
    html("p", { class: "muted" }, box, `length before ${fmt(rot.length, 4)}, after ${fmt(rot.rotated_length, 4)}: a turn never stretches.`);
  };
  for (const id of ["rot-a", "rot-b"]) {
    $(id).addEventListener("change", () => setVector(Number($("rot-a").value) || 0, Number($("rot-b").value) || 0));
  }

  // ghost-hand dials, one per pair, for the query and the key, both moved by the shift
  const drawDials = (dials) => {
    const box = $("rope-dials");
    box.replaceChildren();
    const top = Math.max(...dials.pairs.flatMap((p) => [Math.hypot(...p.q), Math.hypot(...p.k)]), 1e-9);
    const seatOf = { q: dials.m + dials.shift, k: dials.n + dials.shift }, later = [];
    for (const who of ["q", "k"]) {
      const row = html("div", { class: "dial-row", "data-who": who }, box);
      html("p", { class: "dial-row-title" }, row, who === "q"
        ? `query at seat m + ${dials.shift} = ${seatOf.q}` : `key at seat n + ${dials.shift} = ${seatOf.k}`);
      for (const p of dials.pairs) {
        const before = who === "q" ? p.q : p.k, after = who === "q" ? p.q_moved : p.k_moved;
        const turn = who === "q" ? p.q_turn_moved_deg : p.k_turn_moved_deg;
        const handDeg = (Math.atan2(after[1], after[0]) * 180) / Math.PI;
        const card = html("div", { class: "dial-card", "data-pair": p.pair, "data-turn-deg": turn,
          "data-hand-deg": handDeg }, row);
        html("p", { class: "dial-text" }, card, `pair ${p.pair}: θ = ${fmt(p.theta_deg, 2)}°/seat`);
        html("p", { class: "dial-text" }, card, `turned ${fmt(turn, 1)}°${Math.abs(turn) >= 360 ? ` (${fmt(mod360(turn), 1)}° past whole turns)` : ""}`);
        later.push(() => {
          const size = widthOf(card, { min: 60 });   // a clock at its card's width (.dial-card): four a row on a phone
          const s = svg("svg", { viewBox: `0 0 ${size} ${size}`, width: size, height: size, class: "lesson-svg", role: "img",
            "aria-label": `pair ${p.pair}: turned ${fmt(turn, 1)} degrees` });
          card.prepend(s);
          const color = who === "q" ? PAL.query : PAL.key;
          clock(s, { cx: size / 2, cy: size / 2, r: 0.4 * size,
            ghost: { angle: Math.atan2(before[1], before[0]), length: Math.hypot(...before) / top },
            hands: [{ angle: Math.atan2(after[1], after[0]), length: Math.hypot(...after) / top, color }],
            arc: { from: Math.atan2(before[1], before[0]), sweep: rad(folded(turn)), color } });
        });
      }
    }
    // the clocks are drawn once every card is in its row: a card's width depends on its neighbours
    for (const drawClock of later) drawClock();
  };
  const fillDials = (dials) => {
    // the score of the hands drawn above: it follows the gap m − n, not the shift
    $("rope-score").textContent = fmt(dials.score_shifted, 7);
    $("rope-gap").textContent = String(dials.gap);
    numbers($("rope-numbers"), [
      ...dials.pairs.map((p) => `pair ${p.pair}: query turned ${fmt(p.q_turn_moved_deg, 1)}°, key turned ${fmt(p.k_turn_moved_deg, 1)}°, `
        + `gap (m − n)·θ ${signed(p.gap_deg, 1)}°`),
      `score q′·k′ at seats ${dials.m + dials.shift} and ${dials.n + dials.shift} = ${fmt(dials.score_shifted, 7)}; `
        + `at seats ${dials.m} and ${dials.n}: ${fmt(dials.score, 7)}`,
    ]);
    const proof = $("rope-proof");
    proof.replaceChildren();
    const lines = [
      ["q′ = R(mθ) q,  k′ = R(nθ) k", ""],
      ["q′ · k′ = (R(mθ) q)ᵀ R(nθ) k = qᵀ R(mθ)ᵀ R(nθ) k", ""],
      ["R(mθ)ᵀ = R(−mθ), and turns add up:  R(−mθ) R(nθ) = R(−(m − n)θ)", ""],
      ["so  q′ · k′ = qᵀ R(−(m − n)θ) k : only the gap m − n is left", ""],
      [`with m = ${dials.m}, n = ${dials.n}: q′ · k′ =`, fmt(dials.score, 9)],
      [`only the key turned, back by the gap (m − n = ${dials.gap}):`, fmt(dials.score_gap_only, 9)],
      [`both moved by ${dials.shift} (m = ${dials.m + dials.shift}, n = ${dials.n + dials.shift}):`, fmt(dials.score_shifted, 9)],
      ["no turn at all (q · k):", fmt(dials.score_unrotated, 9)],
    ];
    const table = html("table", { class: "proof-table" }, proof);
    html("caption", {}, table, "The relative-angle proof, with the numbers of the dials above (posenc's apply_rotary)");
    for (const [left, right] of lines) {
      const tr = html("tr", {}, table);
      html("td", {}, tr, left);
      html("td", { class: "num" }, tr, right);
    }
  };

  // who bit whom: the row of four dials, one per seat, and the turn from "dog" to "bit"
  const drawOrder = (order) => {
    const holder = $("order-figure"), width = widthOf(holder, { min: 260 });
    const cols = width >= 520 ? 4 : 2, cell = Math.floor(width / cols), r = Math.min(52, cell / 2 - 18);
    const rows = Math.ceil(order.words.length / cols), height = rows * (2 * r + 62);
    const s = root(holder, width, height, `${order.text}: each word's hand at seat times ${fmt(order.degrees, 0)} degrees: `
      + order.words.map((w, i) => `${w} ${fmt(order.angles_deg[i], 0)}`).join(", "));
    order.words.forEach((w, i) => {
      const key = i === order.dog_seat ? "dog" : i === order.bit_seat ? "bit" : null;
      const cx = (i % cols) * cell + cell / 2, cy = Math.floor(i / cols) * (2 * r + 62) + r + 26;
      const color = key === "dog" ? PAL.key : key === "bit" ? PAL.query : "#6b7280";
      const g = clock(s, { cx, cy, r, ghost: { angle: 0, length: 0.85 },
        hands: [{ angle: rad(order.angles_deg[i]), length: 0.85, color, width: key ? 4 : 2.5 }],
        arc: i ? { from: 0, sweep: rad(order.angles_deg[i]), color } : null });
      g.setAttribute("data-word", w);
      g.setAttribute("data-hand-deg", String(order.angles_deg[i]));
      text(s, cx, cy - r - 8, `seat ${i} · ${fmt(order.angles_deg[i], 0)}°`, { size: 12, anchor: "middle", color: INK });
      text(s, cx, cy + r + 18, `“${w}”`, { size: 13, anchor: "middle", color: key === "dog" ? PAL.keyText : key === "bit" ? PAL.queryText : INK, weight: key ? 700 : null });
    });
  };
  const fillOrder = (order) => {
    $("order-turn").textContent = `${signed(order.turn_dog_to_bit_deg, 0)}°`;
    numbers($("order-numbers"), [
      `sentence ${order.sentence ? "B" : "A"}: “${order.text}”; ${order.words.map((w, i) => `${w} ${fmt(order.angles_deg[i], 0)}°`).join(", ")}`,
      `turn from “dog” (seat ${order.dog_seat}) to “bit” (seat ${order.bit_seat}): ${signed(order.turn_dog_to_bit_deg, 0)}°`,
      `score of “bit” looking at “dog”: with RoPE ${fmt(order.score_rope, 4)}; without positions ${fmt(order.score_nope, 4)} in both sentences`,
    ]);
  };
  $("order-rotate").addEventListener("click", () => {
    sentence = 1 - sentence;
    $("order-rotate").setAttribute("aria-pressed", String(sentence === 1));
    $("order-rotate").textContent = sentence ? "Show sentence A: the dog bit man" : "Show sentence B: the man bit dog";
    who.load(0);
  });

  // the two pair conventions, drawn as arcs over the eight numbers of a head
  const drawPairs = (pairs) => {
    const holder = $("pairs-figure"), width = widthOf(holder), d = pairs.head_dim;
    const rowH = 96, s = root(holder, width, 2 * rowH + 8, "which numbers of an 8-wide head are turned together, half-split and interleaved");
    const box = Math.min(56, (width - 8) / d - 4), gap = ((width - 8) - d * box) / (d - 1);
    const xOf = (i) => 4 + i * (box + gap) + box / 2;
    [["half-split (rotate_half): pair i = (x_i, x_i+4)", pairs.pairs_half, "half"],
      ["interleaved: pair i = (x_2i, x_2i+1)", pairs.pairs_interleaved, "interleaved"]].forEach(([label, list, name], r) => {
      const y = r * rowH + 18;
      text(s, 4, y, label, { size: 12, weight: 700 });
      const pairOf = {};
      list.forEach(([a, b], p) => { pairOf[a] = p; pairOf[b] = p; });
      for (let i = 0; i < d; i++) {
        svg("rect", { x: xOf(i) - box / 2, y: y + 8, width: box, height: 26, rx: 4, fill: "#ffffff", stroke: "#8a8f99" }, s);
        text(s, xOf(i), y + 26, `x${i}`, { size: 12, anchor: "middle" });
      }
      // each pair keeps one dash in both rows, and the half-split arcs, which cross, each reach a depth
      // of their own, so every arc can be followed to its label at its lowest point
      list.forEach(([a, b], p) => {
        const x1 = xOf(a), x2 = xOf(b), depth = name === "half" ? 12 + p * 11 : 12, yb = y + 36;
        svg("path", { d: `M${x1},${yb} C${x1},${yb + depth} ${x2},${yb + depth} ${x2},${yb}`, fill: "none", stroke: INK,
          "stroke-width": 1.5, "stroke-dasharray": PAIR_DASHES[p % PAIR_DASHES.length], class: `pair-arc ${name}`,
          "data-a": a, "data-b": b, "data-pair": p, "data-depth": depth }, s);
        const label = text(s, (x1 + x2) / 2, yb + depth * 0.75 + 12, `p${p}`, { size: 12, anchor: "middle", color: MUTED });
        label.setAttribute("class", "pair-label");
        for (const [k, v] of [["stroke", "#ffffff"], ["stroke-width", 4], ["paint-order", "stroke"]]) label.setAttribute(k, v);
      });
    });
  };
  const fillPairs = (pairs) => {
    const table = $("pairs-table");
    table.replaceChildren();
    html("caption", {}, table, `One query and key at seats ${pairs.m} and ${pairs.n}, scored four ways`);
    const head = html("tr", {}, html("thead", {}, table));
    for (const h of ["how", "score q′·k′"]) html("th", { scope: "col" }, head, h);
    const body = html("tbody", {}, table);
    for (const [how, value, key] of [["half-split, the matrix", pairs.score_half, "half"],
      ["interleaved, rows reordered", pairs.score_interleaved, "interleaved"],
      ["complex: Re Σ q′ conj(k′)", pairs.score_complex, "complex"],
      [`complex, the gap ${pairs.m - pairs.n} alone`, pairs.score_gap_only, "gap"]]) {
      const tr = html("tr", { "data-way": key, "data-score": value }, body);
      html("th", { scope: "row" }, tr, how);
      html("td", { class: "num" }, tr, fmt(value, 9));
    }
    stackLabels(table);
    numbers($("pairs-numbers"), [
      `half-split pairs: ${pairs.pairs_half.map(([a, b]) => `(x${a}, x${b})`).join(", ")}; interleaved: ` +
        pairs.pairs_interleaved.map(([a, b]) => `(x${a}, x${b})`).join(", "),
      `complex product against the matrix turn: largest difference ${fmt(pairs.complex_vs_matrix, 2)} (rounding)`,
      ...pairs.q_complex.map(([re, im], i) => `pair ${i}: q = ${fmt(re, 3)} ${im < 0 ? "−" : "+"} ${fmt(Math.abs(im), 3)}i, ` +
        `turned by e^(i·${pairs.m}·${fmt(pairs.theta[i], 4)}) → ${fmt(pairs.q_turned_complex[i][0], 3)} ` +
        `${pairs.q_turned_complex[i][1] < 0 ? "−" : "+"} ${fmt(Math.abs(pairs.q_turned_complex[i][1]), 3)}i`),
    ]);
  };

  // the chapter's four figures: each its route, the controls it reads, its drawing and its text
  const seats = { m: "rope-m", n: "rope-n", shift: "rope-shift" };
  const { units: [plane, , who], redraw } = figures("rope",
    { route: "/api/lesson/rotate", controls: { seat: "rot-seat", theta_deg: "rot-theta" },
      params: (v) => ({ a: vec.a, b: vec.b, ...v }), draw: drawPlane, fill: fillRot },
    { route: "/api/lesson/rope", controls: seats, params: (v) => ({ head_dim: 8, ...v }), draw: drawDials, fill: fillDials },
    { route: "/api/lesson/order", controls: { degrees: "order-deg" }, params: (v) => ({ sentence, ...v }),
      draw: drawOrder, fill: fillOrder },
    { route: "/api/lesson/pairs", controls: seats, params: ({ m, n, shift }) => ({ m: m + shift, n: n + shift }),
      draw: drawPairs, fill: fillPairs });
  return redraw;
}
