// View 10 of the explorer: a `posenc eval` folder (bits per byte against length per scaling, and one
// passkey heatmap of length x needle depth per scaling, with the search beside its default when one ran).

import { fmt, fmtInt, html, lineChart, svg, widthOf } from "../charts.js";
import { $, api, escapeText, loader, register } from "../core.js";
import { SCALING_COLOURS, shadeStyle } from "../palette.js";
import { onResize } from "./workbench.js";

const DASHES = [undefined, "7 4", "2 3", "10 3 2 3"];

function pct(v) { return v === null || v === undefined ? "–" : `${Math.round(100 * v)}%`; }

// One colour per rope type everywhere on the page; specs of one type are told apart by their dash.
function styles(scalings) {
  const seen = {};
  return Object.fromEntries(scalings.map((s) => {
    const type = s.name === "none" ? "default" : s.name;
    const k = (seen[type] = (seen[type] ?? -1) + 1);
    return [s.label, { color: SCALING_COLOURS[type] || "#7f7f7f", dash: DASHES[k % DASHES.length] }];
  }));
}

function ci(pair, digits) {
  return pair ? ` <small>[${fmt(pair[0], digits)}, ${fmt(pair[1], digits)}]</small>` : "";
}

function heatCell(cell, length, depth) {
  if (!cell) return '<td class="num missing">–</td>';
  const a = cell.accuracy;
  const style = shadeStyle(a);
  const wilson = cell.accuracy_ci ? ` <small>[${pct(cell.accuracy_ci[0])}, ${pct(cell.accuracy_ci[1])}]</small>` : "";
  const bits = cell.logp_bits !== null ? `<br><small class="logp">${fmt(cell.logp_bits, 1)} bits</small>` : "";
  const title = `${cell.trials ?? "?"} trials at ${length} tokens, depth ${depth}`;
  return `<td class="num heat" data-accuracy="${a}" style="${style}" title="${escapeText(title)}">${pct(a)}${wilson}${bits}</td>`;
}

function heatmap(label, grid, lengths, depths, trained) {
  const head = `<caption>${escapeText(label)}</caption><thead><tr><th>depth</th>${lengths.map((l) =>
    `<th>${fmtInt(l)}${trained && l > trained ? " ›" : ""}</th>`).join("")}</tr></thead>`;
  const body = depths.map((d) => `<tr><th scope="row">${d}</th>${lengths.map((l) =>
    heatCell((grid[String(l)] || {})[String(d)], l, d)).join("")}</tr>`).join("");
  return `<table class="data heatmap" tabindex="0" data-scaling="${escapeText(label)}">${head}<tbody>${body}</tbody></table>`;
}

export function setupEval() {
  let data = null;
  const refresh = loader("eval", async (signal) => {
    data = await api("/api/eval", {}, signal);
    const notes = $("eval-notes");
    notes.replaceChildren();
    for (const note of data.notes || []) html("li", {}, notes, note);
    $("eval-body").hidden = !data.available;
    $("eval-how").hidden = Boolean(data.available);
    if (!data.available) return;
    $("eval-status").textContent = `${data.model} (${data.model_type}), trained context ${fmtInt(data.trained_context)} tokens; ` +
      `lengths ${data.lengths.map(fmtInt).join(", ")}` + (data.complete ? "" : " (incomplete: results so far)");
    draw();
    tables();
  });
  onResize($("view-eval"), () => draw());

  function draw() {
    if (!data || !data.available) return;
    const look = styles(data.scalings);
    const series = data.scalings.map((s) => ({
      name: s.label, xs: data.lengths, points: true, ...look[s.label],
      ys: data.lengths.map((l) => (data.perplexity[s.label][String(l)] || {}).bpb ?? null),
    })).filter((s) => s.ys.some((v) => v !== null));
    const values = series.flatMap((s) => s.ys).filter((v) => v !== null);
    if (!values.length) { $("eval-chart").textContent = "No perplexity cells yet."; return; }
    const lo = Math.min(...values), hi = Math.max(...values), pad = Math.max(1e-3, 0.05 * (hi - lo));
    lineChart($("eval-chart"), {
      width: widthOf($("eval-chart")), height: 380, title: "bits per byte against evaluation length", wide: true,
      x: { domain: [data.lengths[0], data.lengths[data.lengths.length - 1]], log: true, ticks: data.lengths,
        label: "evaluation length (tokens, log scale)" },
      legend: false,
      y: { domain: [lo - pad, hi + pad], label: "bits per byte" },
      series,
      vlines: data.trained_context ? [{ x: data.trained_context, label: `trained on ${fmtInt(data.trained_context)}`, color: "#333" }] : [],
    });
    // The legend draws each line as it is drawn in the chart, dash included.
    const legend = html("div", { class: "legend", id: "eval-legend" }, $("eval-chart"));
    for (const s of series) {
      const item = html("span", { class: "legend-item", "data-scaling": s.name }, legend);
      const mark = svg("svg", { width: 30, height: 10, "aria-hidden": "true" }, item);
      svg("line", { x1: 1, x2: 29, y1: 5, y2: 5, stroke: s.color, "stroke-width": 2.5, "stroke-dasharray": s.dash }, mark);
      item.appendChild(document.createTextNode(` ${s.name}`));
    }
  }

  function tables() {
    const lengths = data.lengths, trained = data.trained_context;
    const head = `<thead><tr><th>scaling</th><th>how</th>${lengths.map((l) => `<th>${fmtInt(l)}${trained && l > trained ? " ›" : ""}</th>`).join("")}</tr></thead>`;
    const rows = data.scalings.map((s) => `<tr data-scaling="${escapeText(s.label)}"><td>${escapeText(s.label)}</td><td><small>${escapeText(s.how)}</small></td>${lengths.map((l) => {
      const e = data.perplexity[s.label][String(l)];
      if (!e) return `<td class="num missing">${data.skipped[String(l)] ? "skipped" : "–"}</td>`;
      return `<td class="num" data-bpb="${e.bpb}">${fmt(e.bpb, 4)}${ci(e.bpb_ci, 4)}</td>`;
    }).join("")}</tr>`).join("");
    $("eval-ppl").innerHTML = head + `<tbody>${rows}</tbody>`;
    const maps = data.scalings.filter((s) => data.passkey[s.label] && Object.keys(data.passkey[s.label]).length)
      .map((s) => heatmap(s.label, data.passkey[s.label], lengths, data.depths, trained));
    $("eval-passkey").innerHTML = maps.join("") || "<p>No passkey cells in this evaluation.</p>";
    const box = $("eval-search");
    const s = data.search;
    box.hidden = !s;
    if (!s) return;
    const params = (p) => Object.entries(p).filter(([k]) => !["original_max_position_embeddings", "short_factor"].includes(k))
      .map(([k, v]) => Array.isArray(v) ? `${k} ${fmt(Math.min(...v), 3)}..${fmt(Math.max(...v), 3)} (${v.length} pairs)` : `${k} = ${fmt(v, 4)}`).join(", ");
    const row = (role) => { const e = s[role]; return `<tr data-role="${role}"><td>${role} (${escapeText(e.label)})</td><td>${escapeText(params(e.params))}</td>` +
      `<td class="num">${e.search_bpb === null ? "–" : fmt(e.search_bpb, 4) + ci(e.search_bpb_ci, 4)}</td>` +
      `<td class="num">${e.held_out_bpb === undefined || e.held_out_bpb === null ? "–" : fmt(e.held_out_bpb, 4) + ci(e.held_out_bpb_ci, 4)}</td></tr>`; };
    const d = s.held_out_difference;
    $("eval-search-title").textContent = `Search: ${s.type} at ${fmtInt(s.target_length)} tokens (${s.evaluations} configurations)`;
    $("eval-search-table").innerHTML = "<thead><tr><th></th><th>parameters</th><th>search windows (minimised)</th><th>report windows (held out)</th></tr></thead>" +
      `<tbody>${row("default")}${row("best")}</tbody>`;
    $("eval-search-diff").textContent = d && d.bpb !== null
      ? `best minus default on the held-out windows: ${d.bpb >= 0 ? "+" : ""}${fmt(d.bpb, 4)} bits per byte [${fmt(d.bpb_ci[0], 4)}, ${fmt(d.bpb_ci[1], 4)}]`
      : "";
  }
  register("eval", { refresh });
}
