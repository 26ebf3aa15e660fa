// The guided lesson: its chapters, one shown at a time, named by the URL hash.
// The chapters are the lesson's manifest (posenc.teaching.lesson.manifest, sent by GET /api/lesson/chapters):
// the page writes each one's article (its kicker and heading) in the manifest's order, and imports its
// script, the module lesson/chapters/<module>.js named by its id ("bag-of-tiles" is bag_of_tiles.js).
// The script exports the rest of the article, `markup` (figures, controls, error box and the
// data-prose places of the chapter's text), and `setup()`, registered in the page's one registry
// (core.js register) and run the first time the chapter is opened; it loads through core.js's loader,
// and every number it draws comes from the server's /api/lesson endpoints (posenc itself).

import { isRegisteredChapter, lessonManifest, onResize, register, registry, showResized } from "../core.js";
import { renderChecks } from "./checks.js";
import { renderProse } from "./prose.js";

let order = [];                    // chapter ids in reading order, as the manifest lists them
let manifest = {};                 // chapter id -> its manifest entry (title, level, module, checks)
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

function titleOf(id) { return manifest[id].title; }

// Says in the chapter's article that it cannot be shown, and why, in its first error box (one is made
// under the heading if its markup has none): never a blank chapter.
function chapterError(id, message) {
  const node = chapterNode(id);
  let box = node.querySelector(".error");
  if (!box) {
    box = Object.assign(document.createElement("div"), { className: "error chapter-error" });
    box.setAttribute("role", "alert");
    node.querySelector("h2").after(box);
  }
  box.textContent = message;
  box.hidden = false;
}

// A chapter's article as the manifest gives it: its kicker (numbered by buildContents) and heading;
// its script adds the rest.
function article(chapter) {
  const node = document.createElement("article");
  Object.assign(node, { className: "chapter", id: `ch-${chapter.id}`, hidden: true });
  node.dataset.chapter = chapter.id;
  node.dataset.renders = "0";
  const kicker = Object.assign(document.createElement("p"), { className: "kicker" });
  const title = Object.assign(document.createElement("h2"), { textContent: chapter.title });
  node.append(kicker, title);
  return node;
}

// Imports a chapter's script, puts its markup in the article and registers its setup; a script that is missing, fails to load or
// exports no setup() leaves its chapter with an error that says so, and the other chapters work.
async function loadChapter(chapter) {
  const path = `./chapters/${chapter.module}.js`;
  try {
    const module = await import(path);
    if (typeof module.markup !== "string") throw new Error("it exports no markup (the article's figures and text places)");
    if (typeof module.setup !== "function") throw new Error("it exports no setup() function");
    chapterNode(chapter.id).insertAdjacentHTML("beforeend", module.markup);
    register(chapter.id, { setup: module.setup });
  } catch (err) {
    chapterError(chapter.id, `This chapter's figures could not be loaded (lesson/chapters/${chapter.module}.js): ${err.message}`);
  }
}

export function isChapter(id) { return order.includes(id); }

export function showChapter(id, { focus = false } = {}) {
  if (!order.length) return;          // no manifest: the page says so (app.js)
  if (!isChapter(id)) id = order[0];
  for (const c of order) chapterNode(c).hidden = c !== id;
  current = id;
  const entry = isRegisteredChapter(id) ? registry[id] : null;
  if (entry && !entry.ready) {
    entry.ready = true;
    const node = chapterNode(id);
    const fail = (err) => chapterError(id, err.message);
    // the chapter's text first (written once, in posenc.teaching.lesson.chapters), then its figures and checks
    renderProse(node).catch(fail).finally(() => {
      try {
        entry.redraw = entry.setup() || null;
        if (entry.redraw) onResize(node, entry.redraw);
      } catch (err) {
        fail(new Error(`This chapter's figures failed to start (lesson/chapters/${manifest[id].module}.js): ${err.message}`));
      }
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

// The table of contents, the kickers ("Chapter 7 · advanced"), the progress bar and the pager are all
// built from the one manifest.
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
    const kicker = chapterNode(id).querySelector(".kicker"), level = manifest[id].level;
    if (kicker) kicker.textContent = `Chapter ${i + 1}${level ? ` · ${level}` : ""}`;
  });
  document.getElementById("progress").setAttribute("aria-valuemax", String(order.length));
}

// Reads the manifest, writes the chapters' articles before the pager, imports every chapter's script
// (in parallel; each failure stays in its own chapter) and builds the contents and the pager.
export async function setupLesson() {
  const { chapters } = await lessonManifest();
  order = chapters.map((c) => c.id);
  manifest = Object.fromEntries(chapters.map((c) => [c.id, c]));
  const pager = document.querySelector("#lesson-main > .pager");
  for (const chapter of chapters) pager.before(article(chapter));
  await Promise.all(chapters.map(loadChapter));
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

