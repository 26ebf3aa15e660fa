// View 7 of the explorer: lab results (perplexity, passkey retrieval, verdicts from intervals).

import { extent, fmt, fmtInt, html, lineChart, widthOf } from "../charts.js";
import { $, PALETTE, api, loader, slider, escapeText, register } from "../core.js";
import { onResize } from "./workbench.js";
import { SCHEME_COLOURS, STAMP_STYLE, shadeStyle } from "../palette.js";

const BINS = ["near", "mid", "far"];

// Elements this view adds to its section once: the smoke stamp, and the retrieval heatmaps beside the
// perplexity table.
function scaffold() {
  if ($("lab-stamp")) return;
  const body = $("lab-body");
  const stamp = html("p", { id: "lab-stamp", class: "stamp", role: "note", hidden: "",
    style: STAMP_STYLE });
  body.insertBefore(stamp, body.firstChild);
  const evalTable = $("lab-eval");
  const heading = html("h3", {}, null, "Passkey retrieval ");
  html("small", { class: "muted" }, heading,
    "(exact-match accuracy of the greedy-decoded 5-digit key, [95% interval]; rows: key distance, near / mid / far = the training length or more; columns: evaluation length; ft: after a short fine-tune)");
  const wrap = html("div", { id: "lab-retrieval", class: "heatmaps", style: "display:flex;flex-wrap:wrap;gap:0.5em 1.5em;align-items:flex-start" });
  evalTable.after(heading, wrap);
  const sweep = html("p", { id: "lab-sweep", class: "readout", hidden: "" });
  wrap.after(sweep);
  // Without a run of one's own: the run summaries that ship with posenc.
  const committed = html("div", { id: "lab-summaries", hidden: "" });
  body.before(committed);
}

// A missing, None or non-finite number is "not measured", as in the verdicts.
const NOT_MEASURED = '<td class="num missing" title="not measured">not measured</td>';
function measured(v) { return v !== null && v !== undefined && Number.isFinite(v); }

// One committed run summary: bits per byte as mean ± sd over seeds, exact matches k/n per seed, and the
// verdicts per seed and across seeds.
function summaryBlock(s) {
  const lengths = s.eval_lengths || [];
  const head = (label) => `<thead><tr><th>${label}</th>${lengths.map((l) => `<th>${fmtInt(l)}${s.train_len && l > s.train_len ? " ›" : ""}</th>`).join("")}</tr></thead>`;
  const models = Object.entries(s.models || {});
  const bpbRows = models.filter(([, rows]) => lengths.some((l) => rows[String(l)])).map(([model, rows]) => `<tr><td>${escapeText(model)}</td>${lengths.map((l) => {
    const r = rows[String(l)];
    if (!r) return NOT_MEASURED;
    if (r.cannot) return '<td class="num missing">cannot</td>';
    if (!measured(r.bpb_mean)) return NOT_MEASURED;
    const sd = measured(r.bpb_sd) ? ` ± ${fmt(r.bpb_sd, 3)}` : "";
    const per = Object.entries(r.bpb).map(([seed, v]) => `seed ${seed}: ${measured(v) ? fmt(v, 3) : "not measured"}`).join(", ");
    return `<td class="num" data-bpb="${r.bpb_mean}" title="${escapeText(per)}">${fmt(r.bpb_mean, 3)}${sd}</td>`;
  }).join("")}</tr>`).join("");
  const retRows = [];
  for (const [model, rows] of models) {
    for (const b of BINS) {
      if (!lengths.some((l) => rows[String(l)] && rows[String(l)].retrieval[b])) continue;
      retRows.push(`<tr><td>${escapeText(model)}, ${b}</td>${lengths.map((l) => {
        const r = rows[String(l)];
        if (b === "far" && s.train_len && l <= s.train_len) return '<td class="num missing" title="no key lies beyond the training length here">—</td>';
        if (!r || !r.retrieval[b]) return NOT_MEASURED;
        const cells = s.seeds.map((seed) => r.retrieval[b][seed]).map((kn) => (kn ? `${kn[0]}/${kn[1]}` : "not measured"));
        return `<td class="num" data-retrieval="${escapeText(cells.join(" "))}">${cells.join(" · ")}</td>`;
      }).join("")}</tr>`);
    }
  }
  const verdicts = (s.verdicts || []).map((v) => {
    const kind = v.verdict === "seen" ? "seen" : v.verdict === "not seen" ? "not-seen" : v.verdict === "within noise" ? "noise" : "unknown";
    const per = Object.entries(v.by_seed || {}).map(([seed, x]) => `seed ${seed}: ${x}`).join(", ");
    const across = v.one_seed ? "one seed" : measured(v.p) ? `Holm-adjusted p across seeds = ${fmt(v.p, 2)}` : "";
    const note = [across, per].filter(Boolean).join("; ");
    return `<li class="${kind}" data-verdict="${escapeText(v.verdict)}" title="${escapeText(v.evidence || "")}"><b>${escapeText(v.verdict)}</b>${v.one_seed ? " (one seed)" : ""}: ${escapeText(v.claim)} <small>(${escapeText(note)})</small></li>`;
  }).join("");
  const n = s.seeds.length;
  const time = Object.entries(s.cpu_seconds || {}).filter(([, v]) => measured(v)).map(([seed, v]) => `seed ${seed}: ${fmt(v / 60, 3)} min`).join(", ");
  return `<article class="lab-summary" data-summary="${escapeText(s.name)}">
    <h3>${escapeText(s.name)} <small class="muted">(${n} training seed${n === 1 ? "" : "s"}${s.complete ? "" : "; unfinished"})</small></h3>
    ${s.stamp ? `<p class="stamp" role="note" style="${STAMP_STYLE}">Machinery check: ${escapeText(s.stamp)}.</p>` : ""}
    <p class="readout"><code>${escapeText(s.command)}</code>${time ? ` — CPU time ${escapeText(time)}` : ""}</p>
    <h4>Bits per byte <small class="muted">(mean ± standard deviation over training seeds; hover for each seed)</small></h4>
    <table class="data" tabindex="0">${head("model")}<tbody>${bpbRows || `<tr><td colspan="${lengths.length + 1}">none</td></tr>`}</tbody></table>
    <h4>Passkey retrieval <small class="muted">(exact matches k/n, one per seed in seed order)</small></h4>
    <table class="data" tabindex="0">${head("model, keys")}<tbody>${retRows.join("") || `<tr><td colspan="${lengths.length + 1}">none</td></tr>`}</tbody></table>
    <h4>Verdicts across seeds <small class="muted">(seen only when the mean effect clears the spread between training seeds plus the sampling of the windows, paired across seeds, and trials, under Holm's rule over the claims; hover for the evidence)</small></h4>
    <ul class="verdicts">${verdicts || `<li>${s.machinery_check ? "none: a machinery check" : "none"}</li>`}</ul>
  </article>`;
}

function pct(v) { return v === null || v === undefined ? "–" : `${Math.round(100 * v)}%`; }

function heatCell(cell) {
  if (!cell || !measured(cell.accuracy)) return NOT_MEASURED;
  const a = cell.accuracy;
  const ci = cell.accuracy_ci ? ` <small>[${pct(cell.accuracy_ci[0])}, ${pct(cell.accuracy_ci[1])}]</small>` : "";
  const lp = cell.logp_bits !== null && cell.logp_bits !== undefined ? `log2 p(key) ${fmt(cell.logp_bits, 3)} bits` : "";
  const dist = cell.distance ? `, distance ${cell.distance[0]}–${cell.distance[1]}` : "";
  const style = shadeStyle(a);
  const bits = cell.logp_bits !== null && cell.logp_bits !== undefined ? `<br><small class="logp">${fmt(cell.logp_bits, 1)} bits</small>` : "";
  return `<td class="num heat" data-accuracy="${a}" style="${style}" title="${escapeText(`${cell.trials || "?"} trials${dist}; ${lp}`)}">${pct(a)}${ci}${bits}</td>`;
}

function heatmap(title, rows, lengths, trainLen) {
  const head = `<caption>${escapeText(title)}</caption><thead><tr><th>distance</th>${lengths.map((l) =>
    `<th>${fmtInt(l)}${trainLen && l > trainLen ? " ›" : ""}</th>`).join("")}</tr></thead>`;
  const body = BINS.map((b) => `<tr><th scope="row">${b}</th>${lengths.map((l) => {
    const r = rows[String(l)];
    if (r && r.cannot) return '<td class="num missing">cannot</td>';
    if (b === "far" && trainLen && l <= trainLen) return '<td class="num missing" title="no key lies beyond the training length here">—</td>';
    return heatCell(r && r.retrieval ? r.retrieval[b] : null);
  }).join("")}</tr>`).join("");
  return `<table class="data heatmap" tabindex="0">${head}<tbody>${body}</tbody></table>`;
}

export function setupLab() {
  let data = null;
  scaffold();
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
    $("lab-how").hidden = Boolean(data.available);
    const committed = $("lab-summaries");
    committed.hidden = data.available || !(data.summaries || []).length;
    committed.innerHTML = committed.hidden ? "" : data.summaries.map(summaryBlock).join("");
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

  onResize($("view-lab"), () => draw());

  function draw() {
    if (!data || !data.available) return;
    const length = select.value;
    const series = Object.entries(data.schemes).filter(([, s]) => s.loss_by_position[length]).map(([name, s], i) => ({
      name, xs: s.loss_by_position[length].positions, ys: s.loss_by_position[length].loss,
      color: SCHEME_COLOURS[name] || PALETTE[i % PALETTE.length] }));  // a scheme in its one colour
    if (!series.length) { $("lab-chart").textContent = `No loss-by-position curves for length ${length}.`; return; }
    const maxX = Math.max(...series.map((s) => s.xs[s.xs.length - 1] || 1));
    // drawn at the panel's width, so the chart's text keeps its size on a phone
    lineChart($("lab-chart"), {
      width: widthOf($("lab-chart")), height: 400, title: "loss against position", wide: true,
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
      if (!r || !measured(r.bpb)) return NOT_MEASURED;
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
    const stamp = $("lab-stamp");
    stamp.hidden = !data.stamp;
    stamp.textContent = data.stamp ? `Smoke run: ${data.stamp}.` : "";
    verdictList();
    retrieval();
    const lengths = data.eval_lengths.length ? data.eval_lengths : [];
    table($("lab-eval"), Object.entries(data.schemes).map(([n, s]) => [n, s.eval]), lengths, "scheme");
    table($("lab-ext"), Object.entries(data.extension || {}), lengths, "method");
  }
  function retrieval() {
    const lengths = data.eval_lengths || [];
    const parts = [];
    for (const [name, s] of Object.entries(data.schemes)) {
      if (Object.values(s.eval).some((r) => r && Object.keys(r.retrieval || {}).length)) parts.push(heatmap(name, s.eval, lengths, data.train_len));
    }
    for (const [method, rows] of Object.entries(data.extension || {})) {
      const longer = lengths.filter((l) => rows[String(l)]);
      if (longer.some((l) => Object.keys(rows[String(l)].retrieval || {}).length)) parts.push(heatmap(`rope+${method}`, rows, longer, data.train_len));
      const tuned = Object.fromEntries(Object.entries(rows).filter(([, r]) => Object.keys(r.finetuned_retrieval || {}).length)
        .map(([l, r]) => [l, { retrieval: r.finetuned_retrieval }]));
      if (Object.keys(tuned).length) parts.push(heatmap(`rope+${method} ft`, tuned, longer.filter((l) => tuned[String(l)]), data.train_len));
    }
    const first = String(lengths[0]);
    const atTrain = Object.values(data.schemes).flatMap((s) => Object.values((s.eval[first] || {}).retrieval || {}))
      .map((c) => c.accuracy).filter((a) => a !== null && a !== undefined);
    const none = atTrain.length && Math.max(...atTrain) === 0
      ? `<p class="readout" id="lab-no-copy">No model retrieved a single key at the training length (${fmtInt(lengths[0])} bytes): this budget comes before the copy is learned, so compare the log2 p(key) under each cell (−16.6 bits = knowing only that five digits follow).</p>`
      : "";
    $("lab-retrieval").innerHTML = (parts.join("") || "<p>No passkey retrieval in this run.</p>") + none;
    const sweep = $("lab-sweep");
    const chosen = Object.entries(data.lr_sweep || {}).filter(([, v]) => v && v.chosen);
    sweep.hidden = !chosen.length;
    sweep.textContent = chosen.length ? `learning rate chosen per scheme by a short sweep: ${chosen.map(([n, v]) => `${n} ${v.chosen}`).join(", ")}` : "";
  }

  function verdictList() {
    const verdicts = $("lab-verdicts");
    verdicts.replaceChildren();
    const bySide = {};
    for (const v of data.verdicts || []) {
      if (["perplexity", "retrieval", "retrieval-logp"].includes(v.group) && v.scheme) (bySide[v.scheme] ||= {})[v.group] = v;
    }
    for (const [scheme, pair] of Object.entries(bySide)) {
      const item = html("li", { class: "side-by-side" }, verdicts);
      html("b", {}, item, `${scheme}: `);
      const text = [];
      if (pair.perplexity && pair.perplexity.verdict !== "not measured") text.push(`perplexity past the training length: ${pair.perplexity.verdict === "seen" ? "worse" : pair.perplexity.verdict === "not seen" ? "better" : "flat within noise"} (${pair.perplexity.evidence})`);
      if (pair.retrieval && pair.retrieval.verdict !== "not measured") text.push(`retrieval beyond the training length ${pair.retrieval.evidence}: ${pair.retrieval.verdict}`);
      const grip = pair["retrieval-logp"];
      if (grip && grip.verdict !== "not measured") text.push(`log2 p(key) beyond the training length ${grip.evidence}: ${grip.verdict}`);
      item.appendChild(document.createTextNode(text.join("; ") || "not measured"));
    }
    for (const v of data.verdicts || []) {
      const kind = v.verdict === "seen" ? "seen" : v.verdict === "not seen" ? "not-seen" : v.verdict === "within noise" ? "noise" : "unknown";
      const item = html("li", { class: kind }, verdicts);
      html("b", {}, item, `${v.verdict}: `);
      const expected = v.expected ? ` [literature: ${v.expected}]` : "";
      item.appendChild(document.createTextNode(`${v.claim} (${v.evidence})${expected}`));
    }
    if (!verdicts.childElementCount) html("li", {}, verdicts, "no verdicts in this results file");
  }
  register("lab", { refresh });
}
