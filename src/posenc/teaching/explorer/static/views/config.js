// View 9 of the explorer: copy as config.

import { fmt, html } from "../charts.js";
import { $, rope, scaling, api, loader, register, scalingTypes } from "../core.js";

export function setupConfig() {
  // The choices are "none" and every registered scaling the explorer draws (GET /api/scalings).
  let built = false;
  async function buildOptions() {
    if (built) return;
    const select = $("cf-method");
    const chosen = select.value || "yarn";
    select.replaceChildren();
    html("option", { value: "default" }, select, "none");
    for (const s of await scalingTypes()) {
      if (s.overlay) html("option", { value: s.name }, select, s.name);
    }
    select.value = [...select.options].some((o) => o.value === chosen) ? chosen : "default";
    built = true;
  }
  const refresh = loader("config", async (signal) => {
    await buildOptions();
    const frac = Number($("cf-rotary").value);
    const rotary = Math.max(2, 2 * Math.round((rope.headDim * frac) / 2));
    const d = await api("/api/config", { head_dim: rope.headDim, rotary_dim: rotary, base: rope.base,
      layout: $("cf-layout").value, method: $("cf-method").value, max_position_embeddings: $("cf-max").value,
      original_max_position_embeddings: scaling.trainLen, ...scaling.params }, signal);
    $("cf-python").textContent = d.python;
    $("cf-hf-new").textContent = JSON.stringify(d.hf_rope_parameters, null, 2);
    $("cf-hf-old").textContent = JSON.stringify(d.hf_rope_scaling, null, 2);
    $("cf-python").dataset.config = JSON.stringify(d.posenc);
    $("cf-hf-note").hidden = !d.hf_note;
    $("cf-hf-note").textContent = d.hf_note || "";
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
  register("config", { refresh, usesRope: true });
}
