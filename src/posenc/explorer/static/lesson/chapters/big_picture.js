// Key points and the big picture: the order figure and the attention maps.

import { $, api, loader } from "../../core.js";
import { html, svg, fmt, numbers, hbars, root, text, widthOf } from "../../charts.js";
import { SCHEME_COLOURS, textColour, INK, MUTED } from "../../palette.js";

// The chapter's article under its kicker and heading (the page writes those from the manifest): its
// figures, controls and error box, and the data-prose places its text fills (posenc.lesson.chapters).
export const markup = `
  <div class="prose" data-prose="intro"></div>
  <ul class="key-points" data-prose="key-points"></ul>
  <div class="prose" data-prose="measured"></div>
  <div class="prose" data-prose="picture"></div>
  <div class="lanes" data-prose="lanes" data-prose-class="lane"></div>
  <div class="prose" data-prose="picture-after"></div>
  <figure class="lesson-fig" aria-labelledby="big-caption">
    <div class="controls">
      <label>scheme <select id="big-scheme" data-primary>
        <option value="nope">none (NoPE)</option><option value="sinusoidal">sinusoidal</option>
        <option value="learned">learned table</option><option value="rope" selected>RoPE</option><option value="alibi">ALiBi</option>
      </select></label>
    </div>
    <div class="error" role="alert" hidden></div>
    <div id="big-figure" class="fig-box"></div>
    <figcaption id="big-caption" data-prose="big-caption"></figcaption>
    <div class="numbers" id="big-numbers" aria-live="polite"></div>
  </figure>
  <div class="prose" data-prose="figure-after"></div>
  <div class="prose" data-prose="attention"></div>
  <figure class="lesson-fig" aria-labelledby="attn-caption">
    <div class="controls">
      <label class="wide">sentence (up to 12 words) <input type="text" id="attn-text" value="the dog bit the man" maxlength="300"></label>
    </div>
    <div class="error" role="alert" hidden></div>
    <p class="note" id="attn-source" aria-live="polite"></p>
    <div id="attn-maps" class="attn-grid"></div>
    <figcaption id="attn-caption" data-prose="attn-caption"></figcaption>
    <div class="numbers" id="attn-numbers" aria-live="polite"></div>
  </figure>
  <div class="prose" data-prose="attention-after"></div>
  <div class="prose" data-prose="closing"></div>
  <div data-prose="see-also"></div>
`;

export function setup() {
  let data = null;
  const draw = () => {
    if (!data) return;
    const colour = SCHEME_COLOURS[data.scheme];
    hbars($("big-figure"), [
      { label: "“dog” changes by", value: data.dog_difference, rounding: data.dog_rounding, color: colour },
      { label: "“man” changes by", value: data.man_difference, rounding: data.man_rounding, color: colour },
    ], { label: `change of the outputs with ${data.scheme}, on the axis of the largest change any scheme makes`,
      axis: "change of the output (one axis for every scheme)", max: data.scale, format: (v) => fmt(v, 3) });
  };
  const load = loader("big-picture", async (signal) => {
    data = await api("/api/lesson/big-picture", { scheme: $("big-scheme").value }, signal);
    draw();
    numbers($("big-numbers"), [
      `${data.scheme}: “${data.sentences[0]}” against “${data.sentences[1]}”`,
      `the output for “dog” changes by ${fmt(data.dog_difference, 3)}, for “man” by ${fmt(data.man_difference, 3)} `
        + `(rounding level: ${fmt(data.rounding_level, 1)}; the axis ends at ${fmt(data.scale, 3)}, the largest change of any scheme)`,
      data.order_visible ? "the block can tell the two sentences apart" : "rounding only: to this block both sentences are the same bag of words",
    ]);
  });
  $("big-scheme").addEventListener("change", () => load(0));
  load(0);

  // who attends to whom: one grid per scheme, shaded on one scale for the whole page
  let attn = null;
  // a map is titled with the scheme's name in the chapter's menu ("none (NoPE)", "RoPE"), not its id
  const menuName = (scheme) => $("big-scheme").querySelector(`option[value="${scheme}"]`)?.textContent || scheme;
  const drawMaps = () => {
    if (!attn) return;
    const box = $("attn-maps"), words = attn.words, n = words.length;
    box.replaceChildren();
    // one shade scale for every grid, from the smallest to the largest weight on the page (the legend says so)
    const all = attn.maps.flatMap((m) => m.weights.flat());
    const top = Math.max(...all), low = Math.min(...all), spread = Math.max(top - low, 1e-12);
    for (const m of attn.maps) {
      const card = html("div", { class: "attn-card", "data-scheme": m.scheme, "data-source": m.source.kind }, box);
      const width = widthOf(card), labelW = 70, cell = (width - labelW - 4) / n;
      const upright = cell >= 44, headH = upright ? 22 : 64, legendH = 54;
      const height = 24 + headH + n * cell + legendH;
      const s = root(card, width, height, `attention of each word of “${words.join(" ")}” with ${m.scheme}`);
      text(s, 0, 15, `${menuName(m.scheme)} · ${m.source.kind}`, { size: 13, weight: 700, color: textColour(SCHEME_COLOURS[m.scheme]) });
      const short = (w) => (w.length > 8 ? `${w.slice(0, 7)}…` : w);
      words.forEach((w, j) => {
        const x = labelW + (j + 0.5) * cell, y = 24 + headH - 6;
        const t = text(s, x, y, short(w), { size: 12, anchor: upright ? "middle" : "start", color: MUTED });
        if (!upright) t.setAttribute("transform", `rotate(-60 ${x} ${y})`);
      });
      m.weights.forEach((row, i) => {
        const y = 24 + headH + i * cell;
        text(s, labelW - 6, y + cell / 2 + 4, short(words[i]), { size: 12, anchor: "end" });
        const best = row.indexOf(Math.max(...row));
        row.forEach((w, j) => {
          const x = labelW + j * cell, shade = 0.04 + (0.96 * (w - low)) / spread;
          svg("rect", { x, y, width: cell, height: cell, fill: INK, "fill-opacity": shade.toFixed(4), stroke: "#d5d9e0",
            class: "attn-cell", "data-q": i, "data-k": j, "data-w": w }, s);
          if (cell >= 34) text(s, x + cell / 2, y + cell / 2 + (j === best ? 16 : 4), fmt(w, 2),
            { size: 11.5, anchor: "middle", color: shade > 0.55 ? "#ffffff" : INK });
          if (j === best) svg("circle", { cx: x + cell / 2, cy: y + cell / 2 - (cell >= 34 ? 5 : 0), r: Math.max(3, cell * 0.16),
            fill: "#ffffff", stroke: INK, "stroke-width": 2, class: "attn-top", "data-q": i, "data-k": j }, s);
        });
      });
      const ly = 24 + headH + n * cell + 8, lw = Math.min(160, width - labelW - 10);
      text(s, labelW, ly + 10, "attention weight", { size: 12, color: MUTED });
      for (let k = 0; k < 20; k++) svg("rect", { x: labelW + (k * lw) / 20, y: ly + 15, width: lw / 20 + 0.5, height: 9,
        fill: INK, "fill-opacity": (0.04 + (0.96 * (k + 0.5)) / 20).toFixed(3) }, s);
      svg("rect", { x: labelW, y: ly + 15, width: lw, height: 9, fill: "none", stroke: "#8a8f99" }, s);
      text(s, labelW, ly + 37, fmt(low, 2), { size: 12, color: MUTED });
      text(s, labelW + lw, ly + 37, fmt(top, 2), { size: 12, anchor: "end", color: MUTED });
    }
  };
  const loadMaps = loader("big-picture", async (signal) => {
    attn = await api("/api/lesson/attention", { text: $("attn-text").value }, signal);
    drawMaps();
    const kinds = new Set(attn.maps.map((m) => m.source.kind));
    $("attn-source").textContent = kinds.has("trained")
      ? "Maps marked trained come from the lab's trained model of that scheme (its first layer, causal, as it was "
        + "trained; the bytes of each word added up). Maps marked untrained come from the untrained block of chapter 1: "
        + attn.maps.filter((m) => m.source.kind === "untrained").map((m) => `${m.scheme}: ${m.source.text}`).join("; ") + "."
      : "Every map comes from the untrained block of chapter 1 (random weights, no causal mask), because no lab run was "
        + "given; start posenc explore --lab-run RUN to read a model the lab trained. An untrained block spreads its "
        + "attention almost evenly, so compare the rows and the rings rather than how dark a grid is.";
    numbers($("attn-numbers"), attn.maps.map((m) => `${m.scheme} (${m.source.kind}): ` + attn.words.map((w, i) => {
      const row = m.weights[i], j = row.indexOf(Math.max(...row));
      return `${w} → ${attn.words[j]} ${fmt(row[j], 2)}`;
    }).join(", ")));
  });
  $("attn-text").addEventListener("input", () => loadMaps(300));
  loadMaps(0);
  return () => { draw(); drawMaps(); };
}
