// The methods side by side: the comparison table's live columns.

import { $, api, loader, slider } from "../../core.js";
import { fmtInt, numbers } from "../../charts.js";

export function setup() {
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
}
