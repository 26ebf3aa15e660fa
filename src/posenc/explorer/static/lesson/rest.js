// Chapters 9-13: the comparison table, the PyTorch demo, the review of the knowledge checks, the
// common mistakes and the big picture.

import { $, api, loader, register, slider } from "../core.js";
import { html, svg, fmt, fmtInt, numbers, hbars, root, text, widthOf } from "../charts.js";
import { chapterNode } from "./main.js";
import { allChecks, chapterOfCheck, renderChecks, results } from "./checks.js";
import { SCHEME_COLOURS, textColour, C, INK, MUTED } from "../palette.js";

// -- 9. comparison -------------------------------------------------------------------------------------
register("comparison", { setup: () => {
  const len = slider("cmp-len", () => load());
  const load = loader("comparison", async (signal) => {
    const d = await api("/api/lesson/compare", { length: len() }, signal);
    $("cmp-len-head").textContent = String(d.length);
    for (const row of d.schemes) {
      const tr = document.querySelector(`#cmp-table tr[data-scheme="${row.scheme}"]`);
      if (!tr) continue;
      tr.querySelector(".live-params").textContent = fmtInt(row.extra_parameters);
      const cell = tr.querySelector(".live-reads");
      cell.className = `live-reads ${row.reads ? "pass" : "fail"}`;
      cell.textContent = row.reads ? "✓ yes" : `✗ no: ${row.error.split(". ")[0]}`;
    }
    numbers($("cmp-numbers"), d.schemes.map((r) => `${r.scheme} (acts on ${r.where}): ${fmtInt(r.extra_parameters)} extra trainable ` +
      `numbers at width ${d.d_model}; ${d.length} tokens: ${r.reads ? "placed" : "refused"}`));
  });
  load(0);
  return null;
} });

// -- 10. the PyTorch demo -----------------------------------------------------------------------------
register("pytorch-demo", { setup: () => {
  const shift = slider("demo-shift", () => load(150));
  const load = loader("pytorch-demo", async (signal) => {
    const d = await api("/api/lesson/demo", { shift: shift(), d_model: $("demo-width").value }, signal);
    $("demo-code").textContent = d.source;
    $("demo-output").textContent = d.output.join("\n");
  });
  $("demo-width").addEventListener("change", () => load(0));
  load(0);
  return null;
} });

// -- 11. knowledge checks -------------------------------------------------------------------------------
register("knowledge-checks", { setup: () => {
  const id = "knowledge-checks";
  const update = async () => {
    // in reading order: by the chapter that shows each check, then by its place in that chapter
    const place = (check) => {
      const chapter = chapterOfCheck(check.id) || id;
      const ids = [...document.querySelectorAll("#lesson-main > article.chapter")].map((n) => n.dataset.chapter);
      const box = chapterNode(chapter).querySelector(".inline-checks[data-checks]");
      return ids.indexOf(chapter) * 100 + (box ? box.dataset.checks.split(/\s+/).indexOf(check.id) : 0);
    };
    const checks = [...(await allChecks())].sort((a, b) => place(a) - place(b));
    const tried = Object.keys(results).length, right = Object.values(results).filter(Boolean).length;
    $("lq-total").textContent = `${tried} of ${checks.length} checks answered, ${right} right at the first try.`;
    const list = $("lq-index");
    list.replaceChildren();
    for (const check of checks) {
      const item = html("li", {}, list);
      const chapter = chapterOfCheck(check.id) || id;
      item.dataset.check = check.id;
      html("a", { href: `#${chapter}` }, item, check.prompt.split(/(?<=[.?])\s/)[0]);
      html("span", { class: "muted" }, item, ` (chapter: ${chapterNode(chapter).querySelector("h2").textContent})`);
      const state = check.id in results ? (results[check.id] ? " ✓ right" : " ✗ not at first") : " · not yet answered";
      html("span", { class: `check-state ${check.id in results ? (results[check.id] ? "pass" : "fail") : ""}` }, item, state);
    }
  };
  const load = loader(id, async () => {
    await renderChecks(chapterNode(id));
    const first = chapterNode(id).querySelector(".check-card .choice");
    if (first) first.dataset.primary = "";
    await update();
  });
  document.addEventListener("lesson-check-answered", () => { if (!chapterNode(id).hidden) update(); });
  load(0);
  return () => update();
} });

// -- 12. common mistakes --------------------------------------------------------------------------------
register("common-mistakes", { setup: () => {
  let data = null;
  const steps = slider("mis-steps", () => load());
  const width = slider("mis-width", () => load());
  const shift = slider("mis-shift", () => load());
  const draw = () => {
    if (!data) return;
    const p = data.parameter;
    hbars($("mis-param"), [
      { label: "buffer (right)", value: p.buffer.largest_change, color: C.green },
      { label: "nn.Parameter (wrong)", value: p.parameter.largest_change, color: C.vermillion },
    ], { label: "largest change of the table", format: (v) => fmt(v, 4), max: Math.max(0.05, p.parameter.largest_change) });
    hbars($("mis-cat"), [
      { label: `added (width ${data.concat.d_model})`, value: data.concat.added, color: C.green },
      { label: `glued (width ${2 * data.concat.d_model})`, value: data.concat.concatenated, color: C.vermillion },
    ], { label: "parameters of one block", format: (v) => fmtInt(v) });
    hbars($("mis-v"), [
      { label: "q, k turned (right)", value: data.values.qk_only, rounding: data.values.qk_only_rounding, color: C.green },
      { label: "v turned too (wrong)", value: data.values.with_v, rounding: data.values.with_v_rounding, color: C.vermillion },
    ], { label: "change of the last output when the phrase moves", format: (v) => fmt(v, 3) });
  };
  const load = loader("common-mistakes", async (signal) => {
    data = await api("/api/lesson/mistakes", { steps: steps(), d_model: width(), shift: shift() }, signal);
    draw();
    const p = data.parameter;
    numbers($("mis-param-numbers"), [
      `after ${data.steps} Adam step(s): the buffer table moved ${fmt(p.buffer.largest_change, 4)} (trainable numbers ${fmtInt(p.buffer.trainable)})`,
      `the parameter table moved ${fmt(p.parameter.largest_change, 4)} (trainable numbers ${fmtInt(p.parameter.trainable)})`,
    ]);
    numbers($("mis-cat-numbers"), [
      `one block at width ${data.concat.d_model}: ${fmtInt(data.concat.added)} parameters; at ${2 * data.concat.d_model}: ` +
        `${fmtInt(data.concat.concatenated)} (${fmt(data.concat.ratio, 2)} times as many)`,
    ]);
    numbers($("mis-v-numbers"), [
      `phrase of ${data.values.seq} tokens moved by ${data.values.shift}: the last output changes by ${fmt(data.values.qk_only, 2)} ` +
        `with q, k turned, and by ${fmt(data.values.with_v, 4)} with v turned too`,
    ]);
  });
  load(0);
  return draw;
} });

// -- 13. the big picture -------------------------------------------------------------------------------
register("big-picture", { setup: () => {
  let data = null;
  const draw = () => {
    if (!data) return;
    const colour = SCHEME_COLOURS[data.scheme];
    hbars($("big-figure"), [
      { label: "“dog” changes by", value: data.dog_difference, rounding: data.dog_rounding, color: colour },
      { label: "“man” changes by", value: data.man_difference, rounding: data.man_rounding, color: colour },
    ], { label: `change of the outputs with ${data.scheme}, on the axis of the largest change any scheme makes`,
      max: data.scale, format: (v) => fmt(v, 3) });
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
      text(s, 0, 15, `${m.scheme} · ${m.source.kind}`, { size: 13, weight: 700, color: textColour(SCHEME_COLOURS[m.scheme]) });
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
} });
