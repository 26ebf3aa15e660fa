// The posenc explorer page. Every number drawn here is fetched from the server's JSON API, which
// computes it with posenc's own functions; these scripts only lay the numbers out.

import { isView, scalingParamRanges, setupGlobal, show } from "./core.js";
import { setupLesson, showChapter, isChapter } from "./lesson/main.js";
import { setupFingerprint } from "./views/fingerprint.js";
import { setupDials } from "./views/dials.js";
import { setupScores } from "./views/scores.js";
import { setupWavelengths } from "./views/wavelengths.js";
import { setupAlibi } from "./views/alibi.js";
import { setupPrecision } from "./views/precision.js";
import { setupLab } from "./views/lab.js";
import { setupQuiz } from "./views/quiz.js";
import { setupConfig } from "./views/config.js";
import { setupEval } from "./views/eval.js";

setupGlobal();
setupFingerprint();
setupDials();
setupScores();
setupWavelengths();
setupAlibi();
setupPrecision();
setupLab();
setupQuiz();
setupConfig();
setupEval();

// Without its manifest the lesson has no chapters: the page says so where they would be.
function lessonError(err) {
  const box = Object.assign(document.createElement("div"), { className: "error",
    textContent: `The lesson's chapters could not be loaded: ${err.message}` });
  box.setAttribute("role", "alert");
  document.getElementById("lesson-main").prepend(box);
}

// The hash names what is shown: a chapter of the lesson (the landing page), "workbench", or one of
// the workbench's views (#fingerprint, #dials, ...), so every chapter and view has a deep link.
function route() {
  const name = window.location.hash.slice(1);
  const bench = name === "workbench" || isView(name);
  document.getElementById("lesson").hidden = bench;
  document.getElementById("workbench").hidden = !bench;
  for (const link of document.querySelectorAll(".modes a")) {
    const active = (link.dataset.mode === "workbench") === bench;
    if (active) link.setAttribute("aria-current", "page"); else link.removeAttribute("aria-current");
  }
  if (bench) {
    show(name === "workbench" ? "fingerprint" : name);
    document.title = "posenc explorer · workbench";
  } else {
    showChapter(isChapter(name) ? name : "", { focus: name !== "" });
  }
}
// Scaling sliders outside the wavelength view take their ranges from the registry before any panel
// is shown (so no figure reads one before it is set).
// The lesson's chapters come from its manifest, each with its own script (lesson/main.js).
try { await setupLesson(); } catch (err) { lessonError(err); }
try { await scalingParamRanges(); } catch (err) { console.error(`scaling parameter ranges: ${err.message}`); }
window.addEventListener("hashchange", route);
route();
document.body.dataset.ready = "true";
