// View 2 of the explorer: RoPE clock dials.

import { bars, dial, fmt, html, minus, signKey, widthOf } from "../charts.js";
import { $, COLORS, rope, focus, api, loader, slider, escapeText, valueSpan, registry, register } from "../core.js";
import { onResize } from "./workbench.js";
import { MARK_COLOURS, SIGN_COLOURS } from "../palette.js";

// Axis numbers in at most 6 characters, so a 56 px margin never clips them ("0.00276" became "00276"
// in a narrower one): three significant digits, exponent form below 0.01.
export function shortNumber(v) {
  const text = v !== 0 && Math.abs(v) < 0.01 ? v.toExponential(1) : String(Number(v.toPrecision(3)));
  return minus(text);
}

// Words joined by spaces into lines of at most `width` characters.
function wrapWords(words, width) {
  const lines = [""];
  for (const word of words) {
    const last = lines[lines.length - 1];
    if (last && last.length + 1 + word.length > width) lines.push(word);
    else lines[lines.length - 1] = last ? `${last} ${word}` : word;
  }
  return lines;
}

export function setupDials() {
  const q = slider("dl-q", () => refresh());
  const k = slider("dl-k", () => refresh());
  const offset = slider("dl-offset", () => refresh(20));
  const seed = slider("dl-seed", () => refresh());
  const rad = (deg) => (deg * Math.PI) / 180;

  const refresh = loader("dials", async (signal) => {
    const d = await api("/api/rope/dials", { head_dim: rope.headDim, base: rope.base, q_pos: q(), k_pos: k(),
      offset: offset(), seed: seed() }, signal);
    const box = $("dl-dials");
    box.replaceChildren();
    const norms = [...d.q_pairs_moved, ...d.k_pairs_moved].map(([a, b]) => Math.hypot(a, b));
    const top = Math.max(...norms) || 1;
    const m = d.q_pos + d.offset, n = d.k_pos + d.offset;
    d.theta.forEach((theta, i) => {
      const [qa, qb] = d.q_pairs_moved[i], [ka, kb] = d.k_pairs_moved[i];
      const [qa0, qb0] = d.q_pairs_unrotated[i], [ka0, kb0] = d.k_pairs_unrotated[i];
      const qGhost = Math.atan2(qb0, qa0), kGhost = Math.atan2(kb0, ka0);
      const qLen = Math.hypot(qa, qb) / top, kLen = Math.hypot(ka, kb) / top;
      const holder = html("div", { class: "dial-box", "data-pair": i }, box);
      dial(holder, {
        size: widthOf(holder, { min: 100 }),
        hands: [
          { angle: kGhost, length: kLen, color: COLORS.k, width: 1.5, dash: "3 3" },
          { angle: qGhost, length: qLen, color: COLORS.q, width: 1.5, dash: "3 3" },
          { angle: Math.atan2(kb, ka), length: kLen, color: COLORS.k, label: "k" },
          { angle: Math.atan2(qb, qa), length: qLen, color: COLORS.q, label: "q" }],
        // the query's turn m·θ, counter-clockwise from its unturned hand (the server's angle, not a difference
        // of drawn hands, so whole turns and rounding cannot change it)
        arc: { from: qGhost, to: qGhost + rad(d.q_turn_deg[i]), color: COLORS.q },
        title: `pair ${i}: θ = ${fmt(d.theta_deg[i], 3)}°`,
        // seats with many digits are named m and n (the score line gives their values) so a line fits
        caption: [`q turned ${m < 1e4 ? m : "m"}·θ = ${fmt(d.q_turn_deg[i], 1)}°`,
          `k turned ${n < 1e4 ? n : "n"}·θ = ${fmt(d.k_turn_deg[i], 1)}°`,
          `gap (m−n)·θ = ${fmt(d.relative_angle_deg[i], 1)}°`],
      });
      holder.dataset.relativeDeg = d.relative_angle_deg[i];
      holder.dataset.qTurnDeg = d.q_turn_deg[i];
      holder.dataset.kTurnDeg = d.k_turn_deg[i];
      holder.title = `pair ${i}: wavelength ${fmt(d.wavelength[i], 1)} positions. Click to find it in the wavelength view.`;
      holder.tabIndex = 0;
      holder.setAttribute("role", "button");
      holder.setAttribute("aria-label", `pair ${i}: query turned ${fmt(d.q_turn_deg[i], 1)} degrees, key ${fmt(d.k_turn_deg[i], 1)}, `
        + `gap ${fmt(d.relative_angle_deg[i], 1)}. Open in the wavelength view.`);
      const follow = () => {
        focus.pair = i;
        for (const name of ["wavelengths", "precision"]) registry[name].stale = true;
        window.location.hash = "#wavelengths";
      };
      holder.addEventListener("click", follow);
      holder.addEventListener("keydown", (event) => { if (event.key === "Enter" || event.key === " ") { event.preventDefault(); follow(); } });
    });
    $("dl-scoreline").innerHTML = `
      score q′·k′ at seats (m, n) = (${d.q_pos}, ${d.k_pos}): ${valueSpan("dl-score", d.score, 9)}
      · moved to (${m}, ${n}): ${valueSpan("dl-score-moved", d.score_moved, 9)}
      · difference ${fmt(Math.abs(d.score - d.score_moved), 2)}
      · without RoPE q·k = ${fmt(d.score_unrotated, 6)}`;
    const barBox = $("dl-pair-bars");
    bars(barBox, d.pair_scores_moved, { width: widthOf(barBox), height: 120, label: "score per pair",
      tickFormat: shortNumber, left: 56, colour: (v) => (v >= 0 ? SIGN_COLOURS.positive : SIGN_COLOURS.negative) });
    signKey($("dl-pair-key"), { negative: "takes from the score (−)", positive: "adds to the score (+)" });
  });

  // the order proof
  const degrees = slider("wo-deg", () => order());
  const order = loader("dials", async (signal) => {
    const d = await api("/api/rope/order", { text_a: $("wo-a").value, text_b: $("wo-b").value,
      query_word: $("wo-q").value.trim(), key_word: $("wo-k").value.trim(), degrees: degrees() }, signal);
    const box = $("wo-clocks");
    box.replaceChildren();
    d.sentences.forEach((s, which) => {
      const holder = html("div", { class: "dial-box wide", "data-sentence": which }, box);
      const hands = s.words.map((w, i) => ({
        angle: rad(s.seat_angles_deg[i]), length: i === s.query_seat || i === s.key_seat ? 0.74 : 0.5,
        color: i === s.query_seat ? COLORS.q : i === s.key_seat ? COLORS.k : "#b9b9b9",
        width: i === s.query_seat || i === s.key_seat ? 3.5 : 2,
        label: i === s.query_seat || i === s.key_seat ? w : "",
      }));
      dial(holder, {
        size: widthOf(holder, { min: 100 }), hands, ticks: Math.round(360 / d.degrees),
        arc: { from: rad(s.seat_angles_deg[s.key_seat]), to: rad(s.seat_angles_deg[s.key_seat] + s.relative_angle_deg),
          color: MARK_COLOURS.focus },
        title: `${which ? "B" : "A"}: “${s.text}”`,
        caption: wrapWords(s.words.map((w, i) => `${i}:${w}`), 30),
      });
    });
    const [a, b] = d.sentences;
    const chapterTurns = Math.abs(a.relative_angle_deg - 30) < 1e-9 && Math.abs(b.relative_angle_deg + 30) < 1e-9;
    const pair = (v) => `[${v.map((x) => fmt(x, 3)).join(", ")}]`;
    const asWritten = (v) => `[${v.map((x) => (Number.isInteger(x) ? x.toFixed(1) : String(x))).join(", ")}]`; // as ch. 7 writes it
    const line = (s, id, tag) => `<p><b>${tag}</b> “${escapeText(s.text)}”: “${escapeText(d.query_word)}” sits at seat
      ${s.query_seat} (${fmt(s.seat_angles_deg[s.query_seat], 0)}°), “${escapeText(d.key_word)}” at seat ${s.key_seat}
      (${fmt(s.seat_angles_deg[s.key_seat], 0)}°): the query's hand is
      ${s.relative_angle_deg > 0 ? "+" : ""}${valueSpan(`${id}-rel`, s.relative_angle_deg, 1)}° from the key's
      (counter-clockwise positive).
      RoPE score ${valueSpan(`${id}-rope`, s.score_rope, 6)}.</p>`;
    $("wo-proof").innerHTML = `${line(a, "wo-a", "A")}${line(b, "wo-b", "B")}
      <p>Without positions both sentences give the score ${valueSpan("wo-nope", a.score_nope, 6)}
      (the same two vectors). With RoPE the relative angle goes from ${a.relative_angle_deg > 0 ? "+" : ""}${fmt(a.relative_angle_deg, 0)}° to
      ${b.relative_angle_deg > 0 ? "+" : ""}${fmt(b.relative_angle_deg, 0)}°, and the scores differ by ${fmt(Math.abs(a.score_rope - b.score_rope), 4)}:
      attention can tell who bit whom.</p>
      <p class="note" id="wo-lesson-note">Why these scores are not ch. 7's: here each word has its own vector, made
      from the word (“${escapeText(d.query_word)}” queries q = ${pair(d.q)}, “${escapeText(d.key_word)}” keys
      k = ${pair(d.k)}), while <a href="#rope">ch. 7</a> scores one fixed pair, q = ${asWritten(d.lesson_q)} against
      k = ${asWritten(d.lesson_k)}. The score depends on the two vectors and the turn between them alone: ch. 7's pair
      at these seats scores ${valueSpan("wo-a-lesson", a.score_rope_lesson, 5)} in A and
      ${valueSpan("wo-b-lesson", b.score_rope_lesson, 5)} in B${chapterTurns
        ? ", the scores ch. 7 prints for its +30° and −30°" : "; ch. 7 prints its scores at turns of +30° and −30°"}.</p>`;
  }, { selector: ".wo-error" });
  for (const id of ["wo-a", "wo-b", "wo-q", "wo-k"]) $(id).addEventListener("input", () => order(250));
  $("wo-proof-btn").addEventListener("click", () => {
    const proof = $("wo-proof");
    proof.hidden = !proof.hidden;
    $("wo-proof-btn").setAttribute("aria-expanded", String(!proof.hidden));
    $("wo-proof-btn").textContent = proof.hidden ? "See the proof" : "Hide the proof";
  });
  register("dials", { refresh: (wait) => { refresh(wait); order(wait); }, usesRope: true });
  onResize($("view-dials"), () => { refresh(0); order(0); });
}
