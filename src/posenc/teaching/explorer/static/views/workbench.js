// Helpers the workbench views share: tick labels around heatmap canvases; widths come from charts.js
// (widthOf, the page's one sizing rule, imported from there), head colours from palette.js and resizes from core.js.

import { html, ticks } from "../charts.js";

export { headColour, viridis } from "../palette.js";

// Tick labels on the left (rows) and below (columns) of a heatmap. `target` is the canvas, or the
// element wrapping it with overlays; it is moved into a small grid once, and the labels sit at
// percentages of the canvas's size, so they follow any CSS scaling.
export function heatAxes(target, rows, cols, { rowLabel = "", colLabel = "" } = {}) {
  let grid = target.parentElement;
  if (!grid.classList.contains("heat-axes")) {
    grid = html("div", { class: "heat-axes" });
    target.parentElement.insertBefore(grid, target);
    html("div", { class: "heat-yticks", "aria-hidden": "true" }, grid);
    grid.appendChild(target);
    html("div", { class: "heat-corner" }, grid);
    html("div", { class: "heat-xticks", "aria-hidden": "true" }, grid);
  }
  const [ys, xs] = [grid.querySelector(".heat-yticks"), grid.querySelector(".heat-xticks")];
  const place = (box, n, vertical, label) => {
    box.replaceChildren();
    const marks = ticks([0, Math.max(1, n - 1)], false, vertical ? 5 : 6).filter((v) => Number.isInteger(v) && v < n);
    for (const v of marks) {
      const at = `${((v + 0.5) / n) * 100}%`;
      html("span", { class: "heat-tick", style: vertical ? `top:${at}` : `left:${at}`, "data-tick": v }, box, String(v));
    }
    box.dataset.label = label;
  };
  place(ys, rows, true, rowLabel);
  place(xs, cols, false, colLabel);
  grid.dataset.rows = rows;
  grid.dataset.cols = cols;
  return grid;
}

// Workbench views redraw on resizes through the page's one mechanism (core.js).
export { onResize } from "../core.js";
