// View 2 of the explorer: RoPE clock dials.

import { bars, dial, fmt, html } from "../charts.js";
import { $, COLORS, rope, focus, api, loader, slider, escapeText, valueSpan, views, register } from "../core.js";

export function setupDials() {
  const q = slider("dl-q", () => refresh());
  const k = slider("dl-k", () => refresh());
  const offset = slider("dl-offset", () => refresh(20));
  const seed = slider("dl-seed", () => refresh());

  const refresh = loader("dials", async (signal) => {
    const d = await api("/api/rope/dials", { head_dim: rope.headDim, base: rope.base, q_pos: q(), k_pos: k(),
      offset: offset(), seed: seed() }, signal);
    const box = $("dl-dials");
    box.replaceChildren();
    const norms = [...d.q_pairs_moved, ...d.k_pairs_moved].map(([a, b]) => Math.hypot(a, b));
    const top = Math.max(...norms) || 1;
    d.theta.forEach((theta, i) => {
      const [qa, qb] = d.q_pairs_moved[i], [ka, kb] = d.k_pairs_moved[i];
      const qAngle = Math.atan2(qb, qa), kAngle = Math.atan2(kb, ka);
      let between = qAngle - kAngle;
      between = Math.atan2(Math.sin(between), Math.cos(between));
      const holder = html("div", { class: "dial-box", "data-pair": i }, box);
      dial(holder, {
        size: 140,
        hands: [{ angle: kAngle, length: Math.hypot(ka, kb) / top, color: COLORS.k, label: "k" },
          { angle: qAngle, length: Math.hypot(qa, qb) / top, color: COLORS.q, label: "q" }],
        arc: { from: kAngle, to: kAngle + between, color: "#6a51a3" },
        title: `pair ${i} · θ=${fmt(d.theta_deg[i], 2)}°/seat`,
        caption: `q turned ${fmt(d.relative_angle_deg[i], 1)}° more than k`,
      });
      holder.dataset.relativeDeg = d.relative_angle_deg[i];
      holder.title = `pair ${i}: wavelength ${fmt(d.wavelength[i], 1)} positions. Click to find it in the wavelength view.`;
      holder.tabIndex = 0;
      const follow = () => {
        focus.pair = i;
        for (const name of ["wavelengths", "precision"]) views[name].stale = true;
        window.location.hash = "#wavelengths";
      };
      holder.addEventListener("click", follow);
      holder.addEventListener("keydown", (event) => { if (event.key === "Enter") follow(); });
    });
    const mq = d.q_pos + d.offset, mk = d.k_pos + d.offset;
    $("dl-scoreline").innerHTML = `
      score q′·k′ at seats (m, n) = (${d.q_pos}, ${d.k_pos}): ${valueSpan("dl-score", d.score, 9)}
      · moved to (${mq}, ${mk}): ${valueSpan("dl-score-moved", d.score_moved, 9)}
      · difference ${fmt(Math.abs(d.score - d.score_moved), 2)}
      · without RoPE q·k = ${fmt(d.score_unrotated, 6)}`;
    bars($("dl-pair-bars"), d.pair_scores_moved, { height: 120, label: "score per pair",
      colour: (v) => (v >= 0 ? COLORS.q : COLORS.sinusoidal) });
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
      const rad = (deg) => (deg * Math.PI) / 180;
      const hands = s.words.map((w, i) => ({
        angle: rad(s.seat_angles_deg[i]), length: i === s.query_seat || i === s.key_seat ? 0.92 : 0.55,
        color: i === s.query_seat ? COLORS.q : i === s.key_seat ? COLORS.k : "#b9b9b9",
        width: i === s.query_seat || i === s.key_seat ? 3.5 : 2,
        label: i === s.query_seat || i === s.key_seat ? w : "",
      }));
      dial(holder, {
        size: 200, hands, ticks: Math.round(360 / d.degrees),
        arc: { from: rad(s.seat_angles_deg[s.query_seat]), to: rad(s.seat_angles_deg[s.query_seat] + s.relative_angle_deg),
          color: "#6a51a3" },
        title: `${which ? "B" : "A"}: “${s.text}”`,
        caption: s.words.map((w, i) => `${i}:${w}`).join(" "),
      });
    });
    const [a, b] = d.sentences;
    const line = (s, id, tag) => `<p><b>${tag}</b> “${escapeText(s.text)}”: “${escapeText(d.query_word)}” sits at seat
      ${s.query_seat} (${fmt(s.seat_angles_deg[s.query_seat], 0)}°), “${escapeText(d.key_word)}” at seat ${s.key_seat}
      (${fmt(s.seat_angles_deg[s.key_seat], 0)}°): the key is
      ${s.relative_angle_deg > 0 ? "+" : ""}${valueSpan(`${id}-rel`, s.relative_angle_deg, 1)}° from the query.
      RoPE score ${valueSpan(`${id}-rope`, s.score_rope, 6)}.</p>`;
    $("wo-proof").innerHTML = `${line(a, "wo-a", "A")}${line(b, "wo-b", "B")}
      <p>Without positions both sentences give the score ${valueSpan("wo-nope", a.score_nope, 6)}
      (the same two vectors). With RoPE the relative angle goes from ${a.relative_angle_deg > 0 ? "+" : ""}${fmt(a.relative_angle_deg, 0)}° to
      ${b.relative_angle_deg > 0 ? "+" : ""}${fmt(b.relative_angle_deg, 0)}°, and the scores differ by ${fmt(Math.abs(a.score_rope - b.score_rope), 4)}:
      attention can tell who bit whom.</p>`;
  }, { selector: ".wo-error" });
  for (const id of ["wo-a", "wo-b", "wo-q", "wo-k"]) $(id).addEventListener("input", () => order(250));
  $("wo-proof-btn").addEventListener("click", () => {
    const proof = $("wo-proof");
    proof.hidden = !proof.hidden;
    $("wo-proof-btn").setAttribute("aria-expanded", String(!proof.hidden));
    $("wo-proof-btn").textContent = proof.hidden ? "See the proof" : "Hide the proof";
  });
  register("dials", (wait) => { refresh(wait); order(wait); });
}
