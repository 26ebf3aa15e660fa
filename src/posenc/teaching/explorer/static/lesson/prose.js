// A chapter's text, written once in Python (posenc.teaching.lesson.chapters) and printed by `posenc tour` too:
// the server sends it as blocks of parsed spans (GET /api/lesson/prose/{chapter}); this module puts
// each block into the chapter's element with data-prose="<slot>", beside the chapter's figures. A
// caption block is the text of the <figcaption data-prose="<slot>"> of the figure it describes.

import { api } from "../core.js";

// A long word (a dotted name, a call) may break after a '.' or a '(' that a letter follows, so that a
// phone's narrow line splits `LearnedPositionalEmbedding.extend(new_max_len)` between its parts and never
// inside one of them. Ordinary words and numbers ("0.5", "(positions 0..511)") get no break point.
const LONG_WORD = 16;
export function appendBreakable(parent, text) {
  let run = "";
  for (const piece of text.split(/(\s+)/)) {
    if (piece.length < LONG_WORD || !/[.(][A-Za-z_]/.test(piece)) { run += piece; continue; }
    piece.split(/(?<=[.(])(?=[A-Za-z_])/).forEach((part, i) => {
      if (i) { parent.append(run, document.createElement("wbr")); run = ""; }
      run += part;
    });
  }
  if (run) parent.append(run);
  return parent;
}

function inline(parent, spans) {
  for (const span of spans) {
    if (span.style === "text") { appendBreakable(parent, span.text); continue; }
    const tag = { bold: "b", em: "em", code: "code", link: "a" }[span.style];
    if (!tag) throw new Error(`lesson text: unknown span style ${JSON.stringify(span.style)}`);
    const node = appendBreakable(document.createElement(tag), span.text);
    if (tag === "a") node.href = span.href;
    parent.append(node);
  }
  return parent;
}

function labelled(tag, className, label, spans) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (label) { const b = document.createElement("b"); b.textContent = label; node.append(b, " "); }
  return inline(node, spans);
}

// On a phone the table becomes one card per row (lesson.css, table.stack), each cell named by its column.
function table(block) {
  const wrap = document.createElement("div"), t = document.createElement("table");
  wrap.className = "table-wrap prose-table";
  t.className = "data stack";
  const caption = document.createElement("caption");
  inline(caption, block.spans);
  const head = document.createElement("thead"), body = document.createElement("tbody");
  // rows: each cell's plain text; cells: the same cells as spans (a cell may link or show code)
  const [header, ...rows] = block.rows;
  const [headerSpans, ...rowSpans] = block.cells;
  const top = document.createElement("tr");
  headerSpans.forEach((spans) => {
    const th = document.createElement("th");
    th.scope = "col";
    top.append(inline(th, spans));
  });
  head.append(top);
  rows.forEach((row, i) => {
    const tr = document.createElement("tr");
    rowSpans[i].forEach((spans, j) => {
      const td = document.createElement(j === 0 ? "th" : "td");
      if (j === 0) td.scope = "row"; else td.dataset.label = header[j];
      tr.append(inline(td, spans));
    });
    body.append(tr);
  });
  t.append(caption, head, body);
  wrap.append(t);
  return wrap;
}

function element(block, labels) {
  switch (block.kind) {
    case "plain": return labelled("p", "plain", labels.plain, block.spans);
    case "p": return labelled("p", "", "", block.spans);
    case "h3": return labelled("h3", "", "", block.spans);
    case "item": return labelled("li", "", "", block.spans);
    case "note": return labelled("p", "note", "", block.spans);
    case "formula": return labelled("p", "formula-line", "", block.spans);
    case "try": return labelled("p", "try", labels.try, block.spans);
    case "table": return table(block);
    case "see-also": return labelled("p", "see-also", "", block.spans);
    default: throw new Error(`lesson text: unknown block kind ${JSON.stringify(block.kind)}`);
  }
}

// Fills the chapter's data-prose slots once; resolves when the text is on the page.
export async function renderProse(chapter) {
  const slots = chapter.querySelectorAll("[data-prose]");
  if (!slots.length || chapter.dataset.prose === "ready") return;
  const data = await api(`/api/lesson/prose/${chapter.dataset.chapter}`);
  for (const slot of slots) slot.replaceChildren();
  for (const block of data.blocks) {
    const slot = chapter.querySelector(`[data-prose="${block.slot}"]`);
    if (!slot) throw new Error(`lesson text: chapter ${data.chapter} has no place for its ${block.slot} text`);
    if (block.kind === "caption") {
      // a caption is the text of its figure's <figcaption> (the slot), which keeps its own id
      if (slot.tagName !== "FIGCAPTION") throw new Error(`lesson text: caption ${block.slot} has no <figcaption>`);
      inline(slot, block.spans);
      continue;
    }
    const node = element(block, data.labels);
    if (block.id) node.id = block.id;
    if (slot.dataset.proseClass) node.classList.add(slot.dataset.proseClass);
    slot.append(node);
  }
  chapter.dataset.prose = "ready";
}
