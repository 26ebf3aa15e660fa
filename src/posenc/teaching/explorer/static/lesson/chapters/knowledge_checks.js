// Check yourself: the review of every knowledge check, in reading order.

import { $, errorHtml, loader, proseHtml } from "../../core.js";
import { html } from "../../charts.js";
import { chapterNode } from "../main.js";
import { allChecks, chapterOfCheck, renderChecks, results } from "../checks.js";

// The chapter's article under its kicker and heading (the page writes those from the manifest): its
// figures, controls and error box, and the data-prose places its text fills (posenc.teaching.lesson.chapters).
export const markup = [
  proseHtml("intro"),
  errorHtml,
  `<p class="quiz-total" id="lq-total" aria-live="polite"></p>`,
  `<ol class="check-index" id="lq-index"></ol>`,
  proseHtml("precision"),
  `<div class="inline-checks" data-checks="precision" data-primary-checks></div>`,
  proseHtml("after"),
  `<div data-prose="see-also"></div>`,
].join("\n");

export function setup() {
  const id = "knowledge-checks";
  const update = async () => {
    // in reading order: by the chapter that shows each check, then by its place in that chapter
    const place = (check) => {
      const chapter = chapterOfCheck(check.id) || id;
      const ids = [...document.querySelectorAll("#lesson-main > article.chapter")].map((n) => n.dataset.chapter);
      const box = chapterNode(chapter).querySelector(".inline-checks[data-checks]");
      return ids.indexOf(chapter) * 100 + (box ? box.dataset.checks.split(/\s+/).indexOf(check.id) : 0);
    };
    const checks = [...(await allChecks())].sort((a, b) => place(a) - place(b));
    const tried = Object.keys(results).length, right = Object.values(results).filter(Boolean).length;
    $("lq-total").textContent = `${tried} of ${checks.length} checks answered, ${right} right at the first try.`;
    const list = $("lq-index");
    list.replaceChildren();
    for (const check of checks) {
      const item = html("li", {}, list);
      const chapter = chapterOfCheck(check.id) || id;
      item.dataset.check = check.id;
      html("a", { href: `#${chapter}` }, item, check.question);  // the question, not the scene the prompt sets first
      html("span", { class: "muted" }, item, ` (chapter: ${chapterNode(chapter).querySelector("h2").textContent})`);
      const state = check.id in results ? (results[check.id] ? " ✓ right" : " ✗ not at first") : " · not yet answered";
      html("span", { class: `check-state ${check.id in results ? (results[check.id] ? "pass" : "fail") : ""}` }, item, state);
    }
  };
  const load = loader(id, async () => {
    await renderChecks(chapterNode(id));
    const first = chapterNode(id).querySelector(".check-card .choice");
    if (first) first.dataset.primary = "";
    await update();
  });
  document.addEventListener("lesson-check-answered", () => { if (!chapterNode(id).hidden) update(); });
  load(0);
  return () => update();
}
