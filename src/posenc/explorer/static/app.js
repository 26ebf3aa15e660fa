// The posenc explorer page. Every number drawn here is fetched from the server's JSON API, which
// computes it with posenc's own functions; these scripts only lay the numbers out.

import { setupGlobal, show } from "./core.js";
import { setupFingerprint } from "./views/fingerprint.js";
import { setupDials } from "./views/dials.js";
import { setupScores } from "./views/scores.js";
import { setupWavelengths } from "./views/wavelengths.js";
import { setupAlibi } from "./views/alibi.js";
import { setupPrecision } from "./views/precision.js";
import { setupLab } from "./views/lab.js";
import { setupQuiz } from "./views/quiz.js";
import { setupConfig } from "./views/config.js";

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
window.addEventListener("hashchange", () => show(window.location.hash.slice(1)));
show(window.location.hash.slice(1) || "fingerprint");
document.body.dataset.ready = "true";
