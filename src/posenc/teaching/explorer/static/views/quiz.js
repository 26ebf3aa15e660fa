// View 8 of the explorer: knowledge checks.

import { html } from "../charts.js";
import { $, api, showError, clearError, rendered, loader, escapeText, register } from "../core.js";
import { record, results } from "../lesson/checks.js";

export function setupQuiz() {
  // one score with the lesson's checks (lesson/checks.js), kept across reloads
  document.addEventListener("lesson-check-answered", () => { if ($("quiz-list").childElementCount) score(); });
  const refresh = loader("quiz", async (signal) => {
    if ($("quiz-list").childElementCount) return;
    // in the lesson's reading order: the manifest's chapters, each with its checks (GET /api/lesson/chapters)
    const [{ checks: all }, { chapters }] = await Promise.all([api("/api/quiz", {}, signal),
      api("/api/lesson/chapters", {}, signal)]);
    const reading = chapters.flatMap((c) => c.checks);
    const place = (check) => (reading.includes(check.id) ? reading.indexOf(check.id) : reading.length);
    const checks = [...all].sort((a, b) => place(a) - place(b));
    const list = $("quiz-list");
    checks.forEach((check, n) => {
      const card = html("article", { class: "quiz-card", id: `quiz-${check.id}`, "data-check": check.id }, list);
      html("h3", {}, card, `${n + 1}. ${check.topic}`);
      html("p", { class: "prompt" }, card, check.prompt);
      const choices = html("div", { class: "choices" }, card);
      const feedback = html("div", { class: "feedback", id: `quiz-${check.id}-feedback`, "aria-live": "polite" }, card);
      feedback.hidden = true;
      check.choices.forEach((text, i) => {
        const button = html("button", { type: "button", class: "choice", "data-choice": i }, choices, `${"ABCDE"[i]}) ${text}`);
        button.addEventListener("click", () => answer(check, i, card, feedback));
      });
    });
    score();
  });

  async function answer(check, choice, card, feedback) {
    try {
      const r = await api(`/api/quiz/${encodeURIComponent(check.id)}/answer`, { choice });
      for (const b of card.querySelectorAll(".choice")) {
        const i = Number(b.dataset.choice);
        b.classList.toggle("picked", i === choice);
        b.classList.toggle("right", i === r.answer);
        b.classList.toggle("wrong", i === choice && !r.correct);
      }
      feedback.className = `feedback ${r.correct ? "correct" : "incorrect"}`;
      feedback.dataset.correct = String(r.correct);
      feedback.innerHTML = `<p class="verdict">${r.correct ? "✓ Correct." : "✗ Not quite."} ${escapeText(r.feedback)}</p>
        ${r.correct ? "" : `<p>${escapeText(r.explanation)}</p>`}
        <div class="evidence"><span class="muted">computed now by posenc:</span>
        <ul>${r.evidence.map((line) => `<li>${escapeText(line)}</li>`).join("")}</ul></div>`;
      feedback.hidden = false;
      record(check.id, r.correct);
      clearError("quiz");
      rendered("quiz");
    } catch (err) { showError("quiz", err.message); }
  }

  function score() {
    const total = $("quiz-list").childElementCount, tried = Object.keys(results).length;
    const right = Object.values(results).filter(Boolean).length;
    $("quiz-score").textContent = `${tried} of ${total} answered, ${right} right at the first try.`;
  }
  register("quiz", { refresh });
}
