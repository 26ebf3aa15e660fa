// Key points and the big picture: the order figure and the attention maps.

import { $, SCHEME_OPTIONS, choice, figureHtml, figures, inputHtml, menuHtml, proseHtml, typed } from "../../core.js";
import { html, svg, fmt, numbers, root, text, widthOf, scale, tickLabels, lineChart } from "../../charts.js";
import { SCHEME_COLOURS, NEUTRAL_COLOURS, REFERENCE_DASHES, textColour, INK, MUTED } from "../../palette.js";

// The chapter's article under its kicker and heading (the page writes those from the manifest): its
// figures, controls and error box, and the data-prose places its text fills (posenc.teaching.lesson.chapters). Each
// figure's model menu is its model parameter (posenc.teaching.lesson.chapters.big_picture.MODELS): the lesson's
// trained models by default, or the untrained block.
const modelMenu = (id) => menuHtml("model", id, [["trained", "trained"], ["untrained", "untrained"]], { selected: "trained" });
export const markup = [
  proseHtml("intro"),
  `<ul class="key-points" data-prose="key-points"></ul>`,
  proseHtml("measured", "picture"),
  `<div class="lanes" data-prose="lanes" data-prose-class="lane"></div>`,
  proseHtml("picture-after"),
  figureHtml("big", {
    controls: [menuHtml("scheme", "big-scheme", SCHEME_OPTIONS, { selected: "rope", primary: true }), modelMenu("big-model")],
    error: true, note: "big-source", body: `<div id="big-figure" class="fig-box"></div>`, numbers: true,
  }),
  proseHtml("figure-after", "attention"),
  figureHtml("attn", {
    controls: [inputHtml("sentence (up to 12 words)", { type: "text", id: "attn-text", value: "the dog bit the man", maxlength: 300 },
      { wide: true }), modelMenu("attn-model")],
    error: true, note: "attn-source", body: `<div id="attn-maps" class="attn-grid"></div>`, numbers: true,
  }),
  proseHtml("attention-after", "distance"),
  figureHtml("dist", {
    controls: [modelMenu("dist-model")], error: true, note: "dist-source", body: `<div id="dist-figure" class="fig-box"></div>`,
    numbers: true,
  }),
  proseHtml("distance-after", "closing"),
  `<div data-prose="see-also"></div>`,
].join("\n");

export function setup() {
  const draw = (data) => {
    logBars($("big-figure"), data, SCHEME_COLOURS[data.scheme]);
  };
  const fill = (data) => {
    $("big-source").textContent = `Shown: ${data.source.text}.`;
    numbers($("big-numbers"), [
      `${data.scheme}: “${data.sentences[0]}” against “${data.sentences[1]}”`,
      `the full stop's state changes by ${fmt(data.first_difference, 3)} after the first block and by `
        + `${fmt(data.last_difference, 3)} at the end (rounding level: ${fmt(data.rounding_level, 1)}; the axis ends at `
        + `${fmt(data.scale, 3)}, the largest change of any scheme, trained or untrained)`,
      data.order_visible ? `the ${data.model} model tells the two orders apart`
        : "rounding only: to this model both sentences are the same bag of bytes",
    ]);
  };

  // who attends to whom: one grid per scheme, every grid of either model shaded on one fixed scale, a weight of
  // 0 white and 1 the darkest, so the untrained grids are not stretched over their own few hundredths
  // a map is titled with the scheme's name in the chapter's menu ("none (NoPE)", "RoPE"), not its id
  const menuName = (scheme) => $("big-scheme").querySelector(`option[value="${scheme}"]`)?.textContent || scheme;
  const drawMaps = (attn) => {
    const box = $("attn-maps"), words = attn.words, n = words.length;
    box.replaceChildren();
    const low = 0, top = 1;  // the fixed scale (the legend says so)
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
          const x = labelW + j * cell, shade = (w - low) / (top - low);
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
      const legend = svg("g", { class: "attn-legend", "data-low": low, "data-top": top }, s);
      for (let k = 0; k < 20; k++) svg("rect", { x: labelW + (k * lw) / 20, y: ly + 15, width: lw / 20 + 0.5, height: 9,
        fill: INK, "fill-opacity": ((k + 0.5) / 20).toFixed(3) }, legend);
      svg("rect", { x: labelW, y: ly + 15, width: lw, height: 9, fill: "none", stroke: "#8a8f99" }, legend);
      text(legend, labelW, ly + 37, fmt(low, 0), { size: 12, color: MUTED });
      text(legend, labelW + lw, ly + 37, fmt(top, 0), { size: 12, anchor: "end", color: MUTED });
    }
  };
  const fillMaps = (attn) => {
    // which model each map reads, in the words of its figure function
    const texts = [...new Set(attn.maps.map((m) => m.source.text.replace(` ${m.scheme} `, " ")))];
    $("attn-source").textContent = `Shown: ${texts.join("; ")}.`;
    numbers($("attn-numbers"), attn.maps.map((m) => `${m.scheme} (${m.source.kind}): ` + attn.words.map((w, i) => {
      const row = m.weights[i], j = row.indexOf(Math.max(...row));
      return `${w} → ${attn.words[j]} ${fmt(row[j], 2)}`;
    }).join(", ")));
  };

  // attention by distance: how much a byte attends k bytes back, against an even spread (1)
  const drawDistance = (dist) => {
    const box = $("dist-figure"), width = widthOf(box), n = dist.length;
    const ys = dist.schemes.flatMap((s) => s.curve.slice(1));
    const lo = Math.min(...ys.filter((v) => v > 0)), hi = Math.max(...ys);
    const domain = [10 ** Math.floor(Math.log10(Math.min(lo, 1))), 10 ** Math.ceil(Math.log10(Math.max(hi, 1)))];
    lineChart(box, {
      width, height: Math.min(360, Math.max(260, width * 0.55)),
      title: `attention by distance, ${dist.model} models, every scheme`,
      // a log axis: the first ten bytes back, where the schemes differ, get a third of the width, not 7%
      x: { domain: [1, n - 1], log: true, label: "bytes back (log scale; 1 = the byte before)" },
      y: { domain, log: true, label: "attention ÷ even spread (log)" },
      series: dist.schemes.map((s) => ({ name: menuName(s.scheme), key: s.scheme, color: SCHEME_COLOURS[s.scheme],
        xs: s.curve.map((_, k) => k).slice(1), ys: s.curve.slice(1) })),
      // the line's label in the right margin, off the curves
      hlines: [{ y: 1, label: "even spread", color: NEUTRAL_COLOURS.reference, dash: REFERENCE_DASHES.trained }],
      labelsOutside: 84,
    });
  };
  const fillDistance = (dist) => {
    const texts = [...new Set(dist.schemes.map((s) => s.source.text.replace(` ${s.scheme} `, " ")))];
    $("dist-source").textContent = `Shown: ${texts.join("; ")}, first layer, on ${dist.windows} pieces of ${dist.held_out}.`;
    numbers($("dist-numbers"), dist.schemes.map((s) => `${menuName(s.scheme)}: ${fmt(s.near, 2)}× an even spread on the `
      + `${dist.near_bytes} bytes just before, ${fmt(s.far, 2)}× from ${dist.far_from} bytes back`));
  };

  // the chapter's three figures, each with its model menu
  return figures("big-picture",
    { route: "/api/lesson/big-picture", controls: { scheme: choice("big-scheme"), model: choice("big-model") }, draw, fill },
    { route: "/api/lesson/attention", controls: { text: typed("attn-text"), model: choice("attn-model") },
      draw: drawMaps, fill: fillMaps },
    { route: "/api/lesson/attention-distance", controls: { model: choice("dist-model") }, draw: drawDistance, fill: fillDistance },
  ).redraw;
}

// The order figure: "dog" and "man", each a bar on a log axis shared by every scheme of one model, from the
// decade under the smallest change above rounding to the decade over the largest; a change at rounding level
// has no bar and says so.
function logBars(holder, data, colour) {
  const width = widthOf(holder), rowH = 44, room = width - 150, axisH = 46;
  const items = [{ label: "after the first block", value: data.first_difference, rounding: data.first_rounding },
    { label: "at the end (final state)", value: data.last_difference, rounding: data.last_rounding }];
  const lo = 10 ** Math.floor(Math.log10(data.smallest)), hi = 10 ** Math.ceil(Math.log10(data.scale));
  const x = scale([lo, hi], [0, room], true);
  const s = root(holder, width, items.length * rowH + axisH,
    `change of the full stop's state with ${data.scheme}, ${data.model}, on a log axis shared by every scheme and model`);
  s.classList.add("log-bars");
  items.forEach((it, i) => {
    const y = 2 + i * rowH, w = it.rounding ? 0 : x(Math.max(it.value, lo));
    text(s, 0, y + 13, it.label, { size: 12 });
    svg("rect", { x: 0, y: y + 19, width: w, height: 18, fill: colour, class: "bar", "data-value": it.value,
      "data-rounding": it.rounding ? "true" : "false" }, s);
    const shown = it.rounding ? `0 (rounding: ${fmt(it.value, 2)})` : fmt(it.value, 3);
    text(s, w + 5, y + 33, shown, { size: 12, weight: it.rounding ? 700 : null }).setAttribute("class", "bar-value");
  });
  const y0 = items.length * rowH + 4, g = svg("g", { class: "hbar-axis", "data-low": lo, "data-top": hi }, s);
  svg("line", { x1: 0, x2: room, y1: y0, y2: y0, stroke: "#8a8f99", class: "axis" }, g);
  const decades = [];
  for (let e = Math.log10(lo); e <= Math.log10(hi) + 1e-9; e++) decades.push(10 ** Math.round(e));
  const every = Math.max(1, Math.ceil((decades.length * 46) / room));
  const shownTicks = decades.filter((_, k) => k % every === 0 || k === decades.length - 1);
  const labels = tickLabels(shownTicks, true);
  shownTicks.forEach((v, k) => {
    const at = x(v);
    svg("line", { x1: at, x2: at, y1: y0, y2: y0 + 5, stroke: "#8a8f99" }, g);
    const t = text(g, at, y0 + 18, labels[k], { size: 12, color: MUTED,
      anchor: k === 0 ? "start" : k === shownTicks.length - 1 ? "end" : "middle" });
    t.setAttribute("class", "tick");
    t.dataset.value = String(v);
  });
  text(g, 0, y0 + 37, "change of the full stop's state (log scale)",
    { size: 12, color: MUTED }).setAttribute("class", "axis-title");
}
