"""Each view of the explorer in a real headless Chromium against a real ``posenc explore`` server: moves
sliders, hovers the heatmap, answers a knowledge check, and compares the numbers printed on the page with
the numbers posenc computes here (``test_explorer_browser`` holds the workbench as a whole).

The browser is the system Chromium, or ``$POSENC_CHROMIUM``; without it these tests skip, unless
``POSENC_REQUIRE_BROWSER=1`` (set in CI) turns the skip into a failure.
"""

from __future__ import annotations

import json
import math

import pytest
import torch
from browser_support import after_change, open_view, renders, select_and_wait, set_slider, value_of

from posenc.alibi import alibi_bias, alibi_slopes
from posenc.hf import to_hf_dict
from posenc.rope import RotaryEmbedding
from posenc.rope.scaling import Llama3Scaling
from posenc.rope.tables import rope_inv_freq
from posenc.sinusoidal import sinusoidal_table
from posenc.teaching.lesson import palette
from posenc.teaching.lesson.palette import ROLE_COLOURS

pytestmark = pytest.mark.slow  # a real server and a real browser: seconds per test


def test_fingerprint_slider_changes_table_and_hover_shows_library_value(page, server):
    from playwright.sync_api import expect

    section = open_view(page, server, "fingerprint")
    canvas = page.locator("#fp-heat")
    assert canvas.get_attribute("data-cols") == "64"
    set_slider(page, section, "#fp-d-model", 32)
    expect(canvas).to_have_attribute("data-cols", "32")
    set_slider(page, section, "#fp-length", 40)
    expect(canvas).to_have_attribute("data-rows", "40")

    size = float(canvas.get_attribute("data-cell"))
    box = canvas.bounding_box()
    width = float(page.evaluate("() => document.getElementById('fp-heat').width"))
    scale = box["width"] / width
    pos, dim = 17, 5
    page.mouse.move(box["x"] + (dim + 0.5) * size * scale, box["y"] + (pos + 0.5) * size * scale)
    cell = page.locator("#fp-cell-value")
    expect(cell).to_have_attribute("data-pos", str(pos))
    expect(cell).to_have_attribute("data-dim", str(dim))
    assert float(cell.get_attribute("data-value")) == float(sinusoidal_table(40, 32)[pos, dim])
    expect(page.locator("#fp-formula")).to_contain_text(f"cos({pos} /")

    canvas.focus()  # the keyboard moves the cell too
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowDown")
    expect(cell).to_have_attribute("data-dim", str(dim + 1))
    expect(cell).to_have_attribute("data-pos", str(pos + 1))
    assert float(cell.get_attribute("data-value")) == float(sinusoidal_table(40, 32)[pos + 1, dim + 1])

    bars = page.locator("#fp-seat-bars svg")
    before = bars.get_attribute("data-values")
    page.locator("#fp-pos").fill("9")
    expect(bars).to_have_attribute("data-pos", "9")
    row = json.loads(bars.get_attribute("data-values"))
    assert row != json.loads(before)
    assert torch.equal(torch.tensor(row, dtype=torch.float32), sinusoidal_table(40, 32)[9])


def test_moving_both_positions_keeps_the_score(page, server):
    section = open_view(page, server, "dials")
    score = value_of(page, "#dl-score")
    set_slider(page, section, "#dl-offset", 321)
    assert value_of(page, "#dl-score-moved") == pytest.approx(score, abs=1e-9)
    assert page.locator(".dial-box[data-pair]").count() == 8  # head_dim 16 -> 8 pairs

    # the printed score is the library's: RotaryEmbedding on the same example vectors
    g = torch.Generator()
    q = torch.randn(16, generator=g.manual_seed(0), dtype=torch.float64)
    k = torch.randn(16, generator=g.manual_seed(10_000), dtype=torch.float64)
    rope = RotaryEmbedding(16, base=10000.0, max_position_embeddings=8)
    q4, k4 = q.float().view(1, 1, 1, 16), k.float().view(1, 1, 1, 16)
    q_rot = rope(q4, q4, position_ids=torch.tensor([[3 + 321]]))[0]
    k_rot = rope(k4, k4, position_ids=torch.tensor([[1 + 321]]))[1]
    assert score == pytest.approx(float((q_rot * k_rot).sum()), abs=1e-5)

    relative = float(page.locator(".dial-box[data-pair='1']").get_attribute("data-relative-deg"))
    assert relative == pytest.approx(math.degrees(2 * float(rope_inv_freq(16)[1])), abs=1e-9)
    set_slider(page, section, "#dl-q", 10)
    assert value_of(page, "#dl-score") != pytest.approx(score, abs=1e-6)


def test_order_proof_is_revealed_by_a_click(page, server):
    from playwright.sync_api import expect

    open_view(page, server, "dials")
    proof = page.locator("#wo-proof")
    expect(proof).to_be_hidden()
    page.locator("#wo-proof-btn").click()
    expect(proof).to_be_visible()
    # counter-clockwise positive, query minus key: the tour's sign ("dog" to "bit" is +30 in sentence A)
    assert value_of(page, "#wo-a-rel") == pytest.approx(30.0)
    assert value_of(page, "#wo-b-rel") == pytest.approx(-30.0)
    assert value_of(page, "#wo-a-rope") != pytest.approx(value_of(page, "#wo-b-rope"), abs=1e-3)
    old = page.locator("#wo-b-rel").get_attribute("data-value")
    page.locator("#wo-deg").fill("45")
    expect(page.locator("#wo-b-rel")).not_to_have_attribute("data-value", old)
    assert value_of(page, "#wo-b-rel") == pytest.approx(-45.0)
    expect(page.locator("#wo-sign-note")).to_contain_text("counter-clockwise")
    expect(page.locator("#wo-sign-note")).to_contain_text("posenc tour")


def test_score_readout_equals_the_closed_form(page, server):
    section = open_view(page, server, "scores")
    page.locator("#sc-at").fill("37")
    from playwright.sync_api import expect

    expect(page.locator("#sc-rope-at")).to_have_attribute("data-d", "37")
    expected = torch.cos(37 * rope_inv_freq(16, 10000.0)).mean()
    assert value_of(page, "#sc-rope-at") == pytest.approx(float(expected), abs=1e-12)
    table = sinusoidal_table(38, 64, dtype=torch.float64)
    assert value_of(page, "#sc-sin-at") == pytest.approx(float(table[37] @ table[0] / 32), abs=1e-12)
    assert value_of(page, "#sc-alibi-at") == pytest.approx(-37 * float(alibi_slopes(8)[0]))
    slow = torch.cos(37 * rope_inv_freq(16, 501000.0)).mean()
    assert value_of(page, "#sc-rope2-at") == pytest.approx(float(slow), abs=1e-12)
    paths = section.locator("#sc-alibi path.series").count()
    set_slider(page, section, "#sc-heads", 4)
    assert section.locator("#sc-alibi path.series").count() == 4 != paths


def test_clicking_a_dial_finds_its_pair_in_the_wavelength_view(page, server):
    from playwright.sync_api import expect

    open_view(page, server, "dials")
    page.locator(".dial-box[data-pair='5']").click()
    section = page.locator("#view-wavelengths")
    expect(section).to_be_visible()
    readout = page.locator("#wl-readout")
    expect(readout).to_have_attribute("data-pair", "5")
    plain_rope = palette.SCALING_LABELS["default"]
    shown = float(readout.locator(f"[data-series='{plain_rope}']").get_attribute("data-value"))
    assert shown == pytest.approx(2 * math.pi / float(rope_inv_freq(16, 10000.0)[5]), rel=1e-12)
    expect(section.locator("#wl-chart .marker-label", has_text="pair 5 (from the dials)")).to_have_count(1)


def test_wavelength_toggles_and_fixture_picker(page, server):
    from playwright.sync_api import expect

    section = open_view(page, server, "wavelengths")
    assert page.locator("#wl-table tr[data-method='ntk']").count() == 0
    before = renders(section)
    page.locator("#wl-methods input[value='ntk']").check()
    after_change(section, before)
    expect(page.locator("#wl-table tr[data-method='ntk']")).to_have_count(1)

    select_and_wait(page, section, "#wl-fixture", "llama-3.1-8b")
    expect(page.locator("#wl-table tr[data-fixture='llama-3.1-8b']")).to_have_count(1)
    expect(page.locator("#wl-caption")).to_contain_text("128 rotated features")
    ratio = Llama3Scaling(8.0, 1.0, 4.0, 8192)
    from posenc.rope.scaling import rope_frequencies

    scaled = rope_frequencies(ratio, 128, 500000.0)[0] / rope_inv_freq(128, 500000.0)
    kept = int((scaled == 1).sum())
    expect(page.locator("#wl-caption")).to_contain_text(f"{kept} pairs kept")


LABEL_BOXES = """() => {
  const root = document.querySelector("#wl-chart svg");
  const frame = root.querySelector(".axis line.frame").getBoundingClientRect();
  const plotRight = Math.max(
    ...[...root.querySelectorAll(".axis line.frame")].map((l) => l.getBoundingClientRect().right));
  const labels = [...root.querySelectorAll("g.labels > text.marker-label")].map((t) => {
    const b = t.getBoundingClientRect();
    return { text: t.textContent, left: b.left, right: b.right, top: b.top, bottom: b.bottom };
  });
  const panel = root.closest(".panel").getBoundingClientRect();
  return { labels, plotRight, svgWidth: root.getBoundingClientRect().width, panelWidth: panel.width,
           frameTop: frame.top };
}"""


def test_wavelength_labels_sit_outside_the_curves_and_the_chart_fills_its_panel(page, server):
    from playwright.sync_api import expect

    section = open_view(page, server, "wavelengths")
    expect(section.locator("#wl-chart rect.band")).to_have_count(2)  # yarn and llama3, one each
    geometry = page.evaluate(LABEL_BOXES)
    labels = geometry["labels"]
    texts = [label["text"] for label in labels]
    assert "trained context 8,192" in texts and "target 65,536 (× 8)" in texts
    assert "yarn: divide above 8,192" in texts and "llama3: divide above 8,192" in texts  # not run together
    for label in labels:  # right of the plot area
        assert label["left"] >= geometry["plotRight"] - 0.5, label
    for a in labels:
        for other in labels:
            if other is a:
                continue
            overlap = (
                min(a["right"], other["right"]) - max(a["left"], other["left"]) > 0
                and min(a["bottom"], other["bottom"]) - max(a["top"], other["top"]) > 1
            )
            assert not overlap, (a, other)
    assert geometry["svgWidth"] >= 0.9 * geometry["panelWidth"] - 30


def test_methods_without_a_ramp_show_a_slow_down_range_not_a_split(page, server):
    from playwright.sync_api import expect

    section = open_view(page, server, "wavelengths")
    before = renders(section)
    page.locator("#wl-methods input[value='ntk']").check()
    after_change(section, before)
    row = page.locator("#wl-table tr[data-method='ntk']")
    expect(row).to_have_count(1)
    assert row.locator("td[data-kept]").get_attribute("data-kept") == ""
    least, most = (float(v) for v in row.locator("td[data-slowdown]").get_attribute("data-slowdown").split(","))
    assert least == pytest.approx(1.0) and most == pytest.approx(8.0)
    expect(row).to_contain_text("×1.000 … ×8.000")
    assert page.locator("#wl-table tr[data-method='yarn'] td[data-kept]").get_attribute("data-kept") != ""
    select_and_wait(page, section, "#wl-fixture", "phi-3.5-mini-instruct")
    names = [p.get_attribute("data-name") for p in section.locator("#wl-chart path.series").all()]
    assert any(n.startswith("short factors") for n in names) and any(n.startswith("long factors") for n in names)
    expect(page.locator("#wl-table tr[data-fixture]")).to_contain_text("not stated")
    expect(page.locator("#wl-caption")).not_to_contain_text("kept")


def test_alibi_slope_on_the_page_is_the_library_slope(page, server):
    section = open_view(page, server, "alibi")
    set_slider(page, section, "#al-heads", 6)
    set_slider(page, section, "#al-head", 4)
    assert value_of(page, "#al-slope-value") == float(alibi_slopes(6)[4])


def test_alibi_slope_bars_all_have_height_and_readable_labels(page, server):
    section = open_view(page, server, "alibi")
    heights = [float(r.get_attribute("height")) for r in section.locator("#al-slopes rect.bar").all()]
    assert len(heights) == 8 and min(heights) > 10  # the smallest slope is drawn too
    ticks = [t.text_content() for t in section.locator("#al-slopes text.bar-tick").all()]
    assert ticks == ["2⁻¹", "2⁻⁹"]  # one step below 1/256


def test_precision_readout(page, server):
    section = open_view(page, server, "precision")
    set_slider(page, section, "#pr-pos-log", 5)  # position 100000
    inv_freq = rope_inv_freq(16, 10000.0)
    exact = 100000 * inv_freq
    naive = (torch.tensor(100000.0) * inv_freq.float()).double()
    recovered = torch.atan2(naive.sin().float().double(), naive.cos().float().double())
    err = (torch.remainder(recovered - exact + math.pi, 2 * math.pi) - math.pi).abs().max()
    assert value_of(page, "#pr-fp32") == pytest.approx(float(err), abs=1e-15)
    assert value_of(page, "#pr-posenc") < 1e-6
    assert page.locator("#pr-fp16").get_attribute("data-value") == "overflow"


def test_knowledge_check_gives_feedback_with_live_numbers(page, server):
    from playwright.sync_api import expect

    open_view(page, server, "quiz")
    assert page.locator(".quiz-card").count() >= 6
    card = page.locator("#quiz-alibi-head0")
    feedback = page.locator("#quiz-alibi-head0-feedback")
    card.locator(".choice[data-choice='1']").click()
    expect(feedback).to_have_attribute("data-correct", "false")
    expect(feedback).to_contain_text("Not quite")
    card.locator(".choice[data-choice='0']").click()
    expect(feedback).to_have_attribute("data-correct", "true")
    expect(feedback).to_contain_text("head 7: -0.0390625")
    expect(page.locator("#quiz-score")).to_contain_text("1 of")


def test_copy_as_config_matches_posenc_hf(page, server):
    from playwright.sync_api import expect

    section = open_view(page, server, "config")
    select_and_wait(page, section, "#cf-method", "llama3")
    shown = json.loads(page.locator("#cf-hf-new").text_content())
    rope = RotaryEmbedding(16, base=10000.0, scaling=Llama3Scaling(8.0, 1.0, 4.0, 8192), max_position_embeddings=8)
    expected = to_hf_dict(rope)
    expected["max_position_embeddings"] = 65536
    assert shown == expected
    page.locator("button.copy[data-target='cf-hf-new']").click()
    expect(page.locator("button.copy[data-target='cf-hf-new']")).not_to_have_text("Copy")
    expect(page.locator("#cf-hf-note")).to_be_hidden()


def test_ntk_is_copied_as_the_equivalent_rope_theta(page, server):
    from playwright.sync_api import expect

    section = open_view(page, server, "config")
    select_and_wait(page, section, "#cf-method", "ntk")
    shown = json.loads(page.locator("#cf-hf-new").text_content())
    assert shown["rope_parameters"]["rope_type"] == "default"
    assert shown["rope_parameters"]["rope_theta"] == pytest.approx(10000.0 * 8.0 ** (16 / 14), rel=1e-12)
    old_style = json.loads(page.locator("#cf-hf-old").text_content())
    assert old_style["rope_scaling"] is None
    expect(page.locator("#cf-hf-note")).to_be_visible()
    expect(page.locator("#cf-hf-note")).to_contain_text("no static NTK")
    expect(page.locator("#cf-python")).to_contain_text("'rope_type': 'ntk'")


def test_global_rope_settings_drive_the_views_and_bad_values_show_the_api_message(page, server):
    from playwright.sync_api import expect

    section = open_view(page, server, "dials")
    select_and_wait(page, section, "#g-head-dim", "8")
    expect(page.locator(".dial-box[data-pair]")).to_have_count(4)
    page.locator("#g-base").fill("1")
    page.locator("#g-base").dispatch_event("change")
    error = section.locator(".error").first
    expect(error).to_be_visible()
    expect(error).to_contain_text("base")
    page.locator("#g-base").fill("500000")
    page.locator("#g-base").dispatch_event("change")
    expect(error).to_be_hidden()
    theta1 = float(page.locator(".dial-box[data-pair='1']").get_attribute("data-relative-deg"))
    assert theta1 == pytest.approx(math.degrees(2 * float(rope_inv_freq(8, 500000.0)[1])), abs=1e-9)
    # the browser logs the refused request itself; that one is expected here
    page.problems[:] = [p for p in page.problems if "422" not in p]


DIAL_GEOMETRY = """() => [...document.querySelectorAll(".dial-box[data-pair]")].map((box) => {
  const svg = box.querySelector("svg"), frame = svg.getBoundingClientRect();
  const hands = [...svg.querySelectorAll("line.dial-hand")].map((l) => ({
    ghost: l.classList.contains("ghost"), colour: l.getAttribute("stroke"), angle: Number(l.dataset.angleDeg) }));
  const arc = svg.querySelector("path.dial-arc");
  const texts = [...svg.querySelectorAll("text.dial-caption, text.dial-title")].map((t) => {
    const b = t.getBoundingClientRect();
    return { text: t.textContent, inside: b.left >= frame.left - 0.5 && b.right <= frame.right + 0.5 };
  });
  return { pair: Number(box.dataset.pair), qTurn: Number(box.dataset.qTurnDeg), hands, texts,
           from: Number(arc.dataset.fromDeg), sweep: Number(arc.dataset.sweepDeg) };
})"""


def turned(a: float, b: float) -> float:
    """Counter-clockwise angle from direction a to direction b, degrees in [0, 360)."""
    return (b - a) % 360.0


def close_mod_360(a: float, b: float, tol: float = 1e-6) -> bool:
    d = abs(a - b) % 360.0
    return min(d, 360.0 - d) < tol


@pytest.mark.parametrize("head_dim", ["16", "128"])
def test_dial_wedge_is_the_query_turn_m_theta_beside_its_ghost(page, server, head_dim):
    from playwright.sync_api import expect

    section = open_view(page, server, "dials")
    if head_dim != "16":
        select_and_wait(page, section, "#g-head-dim", head_dim)
    set_slider(page, section, "#dl-offset", 5)  # m = 3 + 5, n = 1 + 5
    expect(page.locator(".dial-box[data-pair]")).to_have_count(int(head_dim) // 2)
    inv_freq = rope_inv_freq(int(head_dim), 10000.0)
    m, n = 8, 6
    q = torch.randn(int(head_dim), generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    half = int(head_dim) // 2
    for dial in page.evaluate(DIAL_GEOMETRY):
        i = dial["pair"]
        expected = math.degrees(m * float(inv_freq[i])) % 360.0  # the library's m * theta_i
        assert dial["qTurn"] == pytest.approx(expected, abs=1e-9)
        assert dial["sweep"] == pytest.approx(expected, abs=1e-9)  # the shaded wedge is that turn
        query = ROLE_COLOURS["query"]
        ghost = [h for h in dial["hands"] if h["ghost"] and h["colour"] == query]
        hand = [h for h in dial["hands"] if not h["ghost"] and h["colour"] == query]
        assert len(ghost) == 1 and len(hand) == 1
        assert close_mod_360(ghost[0]["angle"], math.degrees(math.atan2(float(q[half + i]), float(q[i]))))
        assert close_mod_360(dial["from"], ghost[0]["angle"])  # the wedge starts at the ghost
        assert close_mod_360(turned(ghost[0]["angle"], hand[0]["angle"]), expected, 1e-6)  # and ends at q
        captions = [t["text"] for t in dial["texts"]]
        assert any(f"q turned {m}·θ = " in c for c in captions)
        assert any(f"k turned {n}·θ = " in c for c in captions)
        assert all(t["inside"] for t in dial["texts"]), (i, dial["texts"])  # nothing clipped, even at 128


def test_fingerprint_readout_follows_a_smaller_d_model(page, server):
    from playwright.sync_api import expect

    section = open_view(page, server, "fingerprint")
    canvas = page.locator("#fp-heat")
    size = float(canvas.get_attribute("data-cell"))
    box = canvas.bounding_box()
    scale = box["width"] / float(page.evaluate("() => document.getElementById('fp-heat').width"))
    page.mouse.move(box["x"] + 21.5 * size * scale, box["y"] + 13.5 * size * scale)
    cell = page.locator("#fp-cell-value")
    expect(cell).to_have_attribute("data-dim", "21")
    page.mouse.move(0, 0)  # leave the table, then change the settings
    set_slider(page, section, "#fp-d-model", 4)
    expect(cell).to_have_attribute("data-dim", "3")  # pulled into the 4-column table
    expect(cell).to_have_attribute("data-pos", "13")
    assert float(cell.get_attribute("data-value")) == float(sinusoidal_table(64, 4)[13, 3])
    expect(page.locator("#fp-formula")).to_contain_text("PE[13, 3]")
    expect(page.locator("#fp-formula")).not_to_contain_text("PE[13, 21]")
    expect(
        page.locator("#fp-heat")
        .locator("xpath=ancestor::div[contains(@class,'heat-axes')]")
        .locator(".heat-xticks .heat-tick")
        .last
    ).to_have_attribute("data-tick", "3")


def test_alibi_hover_readout_follows_the_head(page, server):
    from playwright.sync_api import expect

    section = open_view(page, server, "alibi")
    canvas = page.locator("#al-bias")
    box = canvas.bounding_box()
    cells = 16
    page.mouse.move(box["x"] + 2.5 * box["width"] / cells, box["y"] + 12.5 * box["height"] / cells)
    out = page.locator("#al-bias-hover")
    expect(out).to_have_attribute("data-head", "0")
    bias = alibi_bias(alibi_slopes(8), torch.arange(16), torch.arange(16))
    assert float(out.get_attribute("data-value")) == pytest.approx(float(bias[0, 12, 2]))
    page.mouse.move(0, 0)
    set_slider(page, section, "#al-head", 7)
    expect(out).to_have_attribute("data-head", "7")  # no stale head-0 number
    assert float(out.get_attribute("data-value")) == pytest.approx(float(bias[7, 12, 2]))
    expect(out).to_contain_text("head 7")


def test_score_defaults_show_the_decay_and_heads_have_distinct_colours(page, server):
    open_view(page, server, "scores")
    chart = page.locator("#sc-chart svg.chart")  # the chart, not its legend swatches
    at0, far = float(chart.get_attribute("data-score-at0")), float(chart.get_attribute("data-far-mean"))
    assert at0 == pytest.approx(1.0) and at0 - far > 0.5
    assert float(chart.get_attribute("data-trend-end")) < 0.3
    assert chart.get_attribute("data-log") == "true"
    colours = [p.get_attribute("stroke") for p in page.locator("#sc-alibi path.series").all()]
    assert len(colours) == 8 and len(set(colours)) == 8
    set_slider(page, page.locator("#view-scores"), "#sc-heads", 16)
    colours = [p.get_attribute("stroke") for p in page.locator("#sc-alibi path.series").all()]
    assert len(colours) == 16 and len(set(colours)) == 16


def test_order_proof_says_why_its_scores_are_not_chapter_sevens(page, server):
    """The proof's scores come from each word's own vector, ch. 7's from one fixed pair: the proof says so
    and prints ch. 7's pair at its seats, which at +30/-30 degrees is ch. 7's printed score."""
    from playwright.sync_api import expect

    from posenc.teaching.lesson.chapters import rope

    facts = rope.numbers()
    open_view(page, server, "dials")
    page.locator("#wo-proof-btn").click()
    note = page.locator("#wo-lesson-note")
    expect(note).to_be_visible()
    # the same turns at other seats than ch. 7's: equal to float64 rounding
    assert value_of(page, "#wo-a-lesson") == pytest.approx(facts["rope.relative.score.A"], abs=1e-12)
    assert value_of(page, "#wo-b-lesson") == pytest.approx(facts["rope.relative.score.B"], abs=1e-12)
    expect(note).to_contain_text(f"{facts['rope.relative.score.A']:.5f}")
    expect(note).to_contain_text(f"{facts['rope.relative.score.B']:.5f}")
    expect(note).to_contain_text("own vector")
    expect(note).to_contain_text(f"q = [{rope.ORDER_VECTORS[0][0]}, {rope.ORDER_VECTORS[0][1]}]")
    expect(note).to_contain_text("the scores ch. 7 prints for its +30° and −30°")
    page.locator("#wo-deg").fill("45")  # other turns: the note no longer calls its numbers ch. 7's
    expect(note).to_contain_text("ch. 7 prints its scores at turns of +30° and −30°")
