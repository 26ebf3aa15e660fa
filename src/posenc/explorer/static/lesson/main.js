// The guided lesson: its chapters, one shown at a time, named by the URL hash.
// Each chapter module registers its chapter in the page's one registry (core.js register, with a
// setup function that runs the first time the chapter is opened) and loads through core.js's loader;
// every number a chapter draws comes from the server's /api/lesson endpoints (posenc itself).

import { isRegisteredChapter, onResize, registry, showResized } from "../core.js";
import { renderChecks } from "./checks.js";
import { renderProse } from "./prose.js";

let order = [];                    // chapter ids in reading order, as the page lists them
let current = null;
const READ_KEY = "posenc-lesson-read";

export function chapterNode(id) { return document.getElementById(`ch-${id}`); }

function readSet() {
  try { return new Set(JSON.parse(window.sessionStorage.getItem(READ_KEY) || "[]")); } catch (err) { return new Set(); }
}

function markRead(id) {
  const read = readSet();
  read.add(id);
  try { window.sessionStorage.setItem(READ_KEY, JSON.stringify([...read])); } catch (err) { /* private mode */ }
  return read;
}

function updateProgress(id) {
  const index = order.indexOf(id), read = markRead(id);
  const fill = document.getElementById("progress-fill"), bar = document.getElementById("progress");
  fill.style.width = `${(100 * (index + 1)) / order.length}%`;
  bar.setAttribute("aria-valuenow", String(index + 1));
  bar.setAttribute("aria-valuetext", `chapter ${index + 1} of ${order.length}`);
  const seen = order.filter((c) => read.has(c)).length;
  document.getElementById("progress-text").textContent =
    `Chapter ${index + 1} of ${order.length} · ${seen} of ${order.length} opened`;
  for (const link of document.querySelectorAll("#toc-list a")) {
    const target = link.getAttribute("href").slice(1);
    if (target === id) link.setAttribute("aria-current", "step"); else link.removeAttribute("aria-current");
    link.parentElement.classList.toggle("read", read.has(target));
  }
  const prev = document.getElementById("chapter-prev"), next = document.getElementById("chapter-next");
  prev.disabled = index === 0;
  prev.textContent = index === 0 ? "← Previous" : `← ${index}. ${titleOf(order[index - 1])}`;
  next.textContent = index === order.length - 1 ? "Workbench →" : `${index + 2}. ${titleOf(order[index + 1])} →`;
}

function titleOf(id) { return chapterNode(id).querySelector("h2").textContent; }

export function isChapter(id) { return order.includes(id); }

export function showChapter(id, { focus = false } = {}) {
  if (!isChapter(id)) id = order[0];
  for (const c of order) chapterNode(c).hidden = c !== id;
  current = id;
  const entry = isRegisteredChapter(id) ? registry[id] : null;
  if (entry && !entry.ready) {
    entry.ready = true;
    const node = chapterNode(id);
    const fail = (err) => {
      const box = node.querySelector(".error");
      if (box) { box.textContent = err.message; box.hidden = false; }
    };
    // the chapter's text first (written once, in posenc.lesson.chapters), then its figures and checks
    renderProse(node).catch(fail).finally(() => {
      entry.redraw = entry.setup() || null;
      if (entry.redraw) onResize(node, entry.redraw);
      renderChecks(node).catch(fail);
    });
  } else if (entry) showResized(chapterNode(id));
  updateProgress(id);
  document.title = `${titleOf(id)} · posenc lesson`;
  if (focus) document.getElementById("lesson-main").focus({ preventScroll: true });
  window.scrollTo(0, 0);
}

function step(delta) {
  const index = order.indexOf(current) + delta;
  if (index >= order.length) { window.location.hash = "#workbench"; return; }
  if (index < 0) return;
  window.location.hash = `#${order[index]}`;
}

function typing(target) {
  return target && (target.closest("input, select, textarea, [contenteditable], [role='slider']") !== null);
}

// The chapters are the page's articles, in the order of the lesson's manifest (posenc.explorer.lesson
// CHAPTERS; a test keeps the two equal). The table of contents, the kickers ("Chapter 7 · advanced"),
// the progress bar and the pager are all built from that one list.
function buildContents() {
  const list = document.getElementById("toc-list");
  list.replaceChildren();
  order.forEach((id, i) => {
    const item = document.createElement("li"), link = document.createElement("a");
    link.href = `#${id}`;
    // the number is part of the link (not a list marker), so it can never be clipped by the column
    const number = document.createElement("span");
    number.className = "toc-num";
    number.textContent = `${i + 1}.`;
    link.append(number, ` ${titleOf(id)}`);
    item.append(link);
    list.append(item);
    const kicker = chapterNode(id).querySelector(".kicker");
    if (kicker) kicker.textContent = `Chapter ${i + 1}${kicker.dataset.level ? ` · ${kicker.dataset.level}` : ""}`;
  });
  document.getElementById("progress").setAttribute("aria-valuemax", String(order.length));
}

export function setupLesson() {
  order = [...document.querySelectorAll("#lesson-main > article.chapter")].map((n) => n.dataset.chapter);
  buildContents();
  document.getElementById("chapter-prev").addEventListener("click", () => step(-1));
  document.getElementById("chapter-next").addEventListener("click", () => step(1));
  document.addEventListener("keydown", (event) => {
    if (document.getElementById("lesson").hidden || event.altKey || event.ctrlKey || event.metaKey) return;
    if (typing(event.target)) return;
    if (event.key === "ArrowRight" || event.key === "n") { event.preventDefault(); step(1); }
    if (event.key === "ArrowLeft" || event.key === "p") { event.preventDefault(); step(-1); }
  });
  // On a phone the chapter list starts folded, so the chapter itself comes first.
  if (window.matchMedia("(max-width: 760px)").matches) document.getElementById("toc-box").open = false;
}

