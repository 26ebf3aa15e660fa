// The PyTorch demo: its source and what it prints, run by the server.

import { $, choice, figureHtml, figures, menuHtml, proseHtml, range, sliderHtml } from "../../core.js";

// The chapter's article under its kicker and heading (the page writes those from the manifest): its
// figures, controls and error box, and the data-prose places its text fills (posenc.teaching.lesson.chapters).
export const markup = [
  proseHtml("intro"),
  figureHtml("demo", {
    controls: [sliderHtml("move the pair by", "demo-shift", { min: 0, max: 10000, step: 1, value: 100, primary: true }),
      menuHtml("table width", "demo-width", ["4", "8", "16"], { selected: "4" })],
    error: true,
    body: `<pre class="code-block" id="demo-code" tabindex="0" aria-label="the demo's source code (scrolls sideways on a narrow screen)"></pre>
<pre class="code-output" id="demo-output" aria-live="polite" tabindex="0" aria-label="what the demo printed"></pre>`,
  }),
  proseHtml("after"),
].join("\n");

export function setup() {
  return figures("pytorch-demo", {
    route: "/api/lesson/demo",
    controls: { shift: range("demo-shift", { wait: 150 }), d_model: choice("demo-width") },
    fill: (d) => {
      $("demo-code").textContent = d.source;
      $("demo-output").textContent = d.output.join("\n");
    },
  }).redraw;
}
