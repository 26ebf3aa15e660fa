// Chapters 9-13: the comparison table, the PyTorch demo, the review of the knowledge checks, the
// common mistakes and the big picture.

import { $, api, slider } from "../core.js";
import { chapterLoader, chapterNode, registerChapter } from "./main.js";
import { allChecks, chapterOfCheck, renderChecks, results } from "./checks.js";
import { C, html, fmt, fmtInt, numbers, hbars } from "./draw.js";
import { SCHEME_COLOURS } from "../palette.js";

// -- 9. comparison -------------------------------------------------------------------------------------
registerChapter("comparison", () => {
  const len = slider("cmp-len", () => load());
  const load = chapterLoader("comparison", async (signal) => {
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
});

// -- 10. the PyTorch demo -----------------------------------------------------------------------------
registerChapter("pytorch-demo", () => {
  const shift = slider("demo-shift", () => load(150));
  const load = chapterLoader("pytorch-demo", async (signal) => {
    const d = await api("/api/lesson/demo", { shift: shift(), d_model: $("demo-width").value }, signal);
    $("demo-code").textContent = d.source;
    $("demo-output").textContent = d.output.join("\n");
  });
  $("demo-width").addEventListener("change", () => load(0));
  load(0);
  return null;
});

// -- 11. knowledge checks -------------------------------------------------------------------------------
registerChapter("knowledge-checks", () => {
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
  const load = chapterLoader(id, async () => {
    await renderChecks(chapterNode(id));
    const first = chapterNode(id).querySelector(".check-card .choice");
    if (first) first.dataset.primary = "";
    await update();
  });
  document.addEventListener("lesson-check-answered", () => { if (!chapterNode(id).hidden) update(); });
  load(0);
  return () => update();
});

// -- 12. common mistakes --------------------------------------------------------------------------------
registerChapter("common-mistakes", () => {
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
  const load = chapterLoader("common-mistakes", async (signal) => {
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
});

// -- 13. the big picture -------------------------------------------------------------------------------
registerChapter("big-picture", () => {
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
  const load = chapterLoader("big-picture", async (signal) => {
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
  return draw;
});
