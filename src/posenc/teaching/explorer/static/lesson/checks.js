// Knowledge checks placed inside the chapters they test. The questions and the feedback come from
// the server's knowledge checks (/api/quiz); the right answer is only learned after a choice, together
// with evidence that posenc computes at that moment.

import { api } from "../core.js";
import { html } from "../charts.js";

let listing = null;

// The one score of the knowledge checks, for the lesson's pages and the workbench's quiz alike: check id
// -> right at the first try, kept in the browser's storage so that a reload does not reset it.
const STORE = "posenc.knowledge-checks.first-try";

function stored() {
  try {
    const kept = JSON.parse(localStorage.getItem(STORE) || "{}");
    const fine = kept && typeof kept === "object" && !Array.isArray(kept)
      && Object.values(kept).every((v) => typeof v === "boolean");
    return fine ? kept : {};
  } catch { return {}; }                // storage off or unreadable: the score starts afresh
}

export const results = stored();

// Records the first answer to check `id` (later answers keep the first) and tells every score.
export function record(id, correct) {
  if (!(id in results)) {
    results[id] = correct;
    try { localStorage.setItem(STORE, JSON.stringify(results)); } catch { /* storage off: this visit only */ }
  }
  document.dispatchEvent(new CustomEvent("lesson-check-answered"));
}

export function allChecks() {
  if (!listing) listing = api("/api/quiz").then((r) => r.checks);
  return listing;
}

// The chapter whose page shows a check, from the data-checks attributes of the page.
export function chapterOfCheck(id) {
  for (const box of document.querySelectorAll(".inline-checks[data-checks]")) {
    if (box.dataset.checks.split(/\s+/).includes(id)) return box.closest("article.chapter").dataset.chapter;
  }
  return null;
}

function card(check, parent) {
  const node = html("section", { class: "check-card", id: `lq-${check.id}`, "data-check": check.id,
    "aria-labelledby": `lq-${check.id}-title` }, parent);
  html("h3", { id: `lq-${check.id}-title` }, node, `Knowledge check · ${check.topic}`);
  html("p", { class: "prompt" }, node, check.prompt);
  const choices = html("div", { class: "choices", role: "group", "aria-label": "answers" }, node);
  const feedback = html("div", { class: "feedback", id: `lq-${check.id}-feedback`, "aria-live": "polite" }, node);
  feedback.hidden = true;
  check.choices.forEach((text, i) => {
    const button = html("button", { type: "button", class: "choice", "data-choice": i }, choices, `${"ABCDE"[i]}) ${text}`);
    button.addEventListener("click", () => answer(check, i, node, feedback));
  });
  return node;
}

async function answer(check, choice, node, feedback) {
  try {
    const r = await api(`/api/quiz/${encodeURIComponent(check.id)}/answer`, { choice });
    for (const b of node.querySelectorAll(".choice")) {
      const i = Number(b.dataset.choice);
      b.classList.toggle("right", i === r.answer);
      b.classList.toggle("wrong", i === choice && !r.correct);
      b.setAttribute("aria-pressed", String(i === choice));
    }
    feedback.className = `feedback ${r.correct ? "correct" : "incorrect"}`;
    feedback.dataset.correct = String(r.correct);
    feedback.replaceChildren();
    html("p", { class: "verdict" }, feedback, `${r.correct ? "✓ Right." : "✗ Not quite."} ${r.feedback}`);
    if (!r.correct) html("p", {}, feedback, r.explanation);
    const evidence = html("div", { class: "evidence" }, feedback);
    html("p", { class: "muted" }, evidence, "Computed just now by posenc:");
    const list = html("ul", {}, evidence);
    for (const line of r.evidence) html("li", {}, list, line);
    feedback.hidden = false;
    const article = node.closest("article.chapter");
    if (article) article.dataset.renders = String(Number(article.dataset.renders || 0) + 1);
    record(check.id, r.correct);
  } catch (err) {
    feedback.className = "feedback incorrect";
    feedback.textContent = err.message;
    feedback.hidden = false;
  }
}

// Fills every .inline-checks box inside `scope` with its checks (once).
export async function renderChecks(scope) {
  const boxes = [...scope.querySelectorAll(".inline-checks[data-checks]")].filter((b) => !b.dataset.filled);
  if (!boxes.length) return;
  for (const box of boxes) box.dataset.filled = "true";
  const checks = await allChecks();
  const byId = new Map(checks.map((c) => [c.id, c]));
  for (const box of boxes) {
    for (const id of box.dataset.checks.split(/\s+/)) if (byId.has(id)) card(byId.get(id), box);
  }
  // checks that no chapter names yet are asked on the review page
  const review = boxes.find((b) => b.hasAttribute("data-primary-checks"));
  if (review) for (const check of checks) if (!chapterOfCheck(check.id)) card(check, review);
}
