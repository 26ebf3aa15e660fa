// View 7 of the explorer: lab results.

import { extent, fmt, fmtInt, html, lineChart } from "../charts.js";
import { $, PALETTE, api, loader, slider, escapeText, register } from "../core.js";

export function setupLab() {
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
    $("lab-how").hidden = Boolean(data.available);
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
      width: 1240, height: 400, title: "loss against position", wide: true,
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
