// The PyTorch demo: its source and what it prints, run by the server.

import { $, api, loader, slider } from "../../core.js";

export function setup() {
  const shift = slider("demo-shift", () => load(150));
  const load = loader("pytorch-demo", async (signal) => {
    const d = await api("/api/lesson/demo", { shift: shift(), d_model: $("demo-width").value }, signal);
    $("demo-code").textContent = d.source;
    $("demo-output").textContent = d.output.join("\n");
  });
  $("demo-width").addEventListener("change", () => load(0));
  load(0);
  return null;
}
