// The PyTorch demo: its source and what it prints, run by the server.

import { $, choice, figures, range } from "../../core.js";

// The chapter's article under its kicker and heading (the page writes those from the manifest): its
// figures, controls and error box, and the data-prose places its text fills (posenc.lesson.chapters).
export const markup = `
  <div class="prose" data-prose="intro"></div>
  <figure class="lesson-fig" aria-labelledby="demo-caption">
    <div class="controls">
      <label>move the pair by <input type="range" id="demo-shift" min="0" max="10000" step="1" value="100" data-primary><output id="demo-shift-out">100</output></label>
      <label>table width <select id="demo-width"><option selected>4</option><option>8</option><option>16</option></select></label>
    </div>
    <div class="error" role="alert" hidden></div>
    <pre class="code-block" id="demo-code" tabindex="0" aria-label="the demo's source code (scrolls sideways on a narrow screen)"></pre>
    <pre class="code-output" id="demo-output" aria-live="polite" tabindex="0" aria-label="what the demo printed"></pre>
    <figcaption id="demo-caption" data-prose="demo-caption"></figcaption>
  </figure>
  <div class="prose" data-prose="after"></div>
`;

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
