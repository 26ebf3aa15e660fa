"""The explorer in a real headless Chromium, driven by Playwright, against a real server.

The test starts ``posenc explore`` as a subprocess (the same command a user types), opens every view,
moves sliders, hovers the heatmap, answers a knowledge check, and compares the numbers printed on the
page with the numbers posenc computes here. A screenshot of every view lands in
``$POSENC_SCREENSHOT_DIR`` (default: a folder under pytest's temporary directory), never in the
repository.

The browser is the system Chromium, or the executable ``$POSENC_CHROMIUM`` names (Playwright never
downloads one). Without it these tests skip with the reason, unless ``POSENC_REQUIRE_BROWSER=1`` (set in
CI), which turns the skip into a failure.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from pathlib import Path

import pytest
import torch
from browser_support import chromium_or_skip, explore_server, headless_chromium

from posenc.alibi import alibi_bias, alibi_slopes
from posenc.hf import to_hf_dict
from posenc.lesson import palette
from posenc.lesson.palette import ROLE_COLOURS
from posenc.rope import RotaryEmbedding
from posenc.rope.scaling import Llama3Scaling
from posenc.rope.tables import rope_inv_freq
from posenc.sinusoidal import sinusoidal_table

pytestmark = pytest.mark.slow  # a real server and a real browser: seconds per test

VIEWS = ("fingerprint", "dials", "scores", "wavelengths", "alibi", "precision", "lab", "quiz", "config")


@pytest.fixture(scope="module")
def chromium_path():
    return chromium_or_skip()


@pytest.fixture(scope="module")
def lab_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("lab-run")
    losses = [3.0 - 0.5 * math.exp(-i / 40) for i in range(256)] + [3.4 + i / 400 for i in range(256)]
    (run / "results.json").write_text(
        json.dumps(
            {
                "schema_version": 2,
                "kind": "results",  # posenc.lab.schema's stamp
                "config": {"d_model": 64},
                "train_len": 256,
                "eval_lengths": [256, 512],
                "schemes": {
                    "rope": {
                        "eval": {
                            "256": {"bpb": 2.25, "bpb_ci": [2.2, 2.3]},
                            "512": {"bpb": 2.75, "bpb_ci": [2.6, 2.9]},
                        },
                        "loss_by_position": {"512": losses},
                    },
                    "alibi": {
                        "eval": {"256": {"bpb": 2.3}, "512": {"bpb": 2.35}},
                        "loss_by_position": {"512": [2.9] * 512},
                    },
                    "learned": {
                        "eval": {"256": {"bpb": 2.4}, "512": {"cannot": True, "note": "cannot: 256 rows"}},
                        "loss_by_position": {},
                    },
                },
                "extension": {"yarn": {"512": {"bpb": 2.4, "finetuned": {"bpb": 2.31}}}},
                "complete": True,
                "verdicts": [
                    {"claim": "ALiBi stays within 5% at the longest length", "seen": True, "evidence": "+2.2%"},
                    {"claim": "Plain RoPE loses quality beyond the training length", "seen": True, "evidence": "+22%"},
                ],
            }
        ),
        encoding="utf-8",
    )
    return run


@pytest.fixture(scope="module")
def server(chromium_path, lab_run):
    """``posenc explore --port 0`` in a subprocess; yields its base URL."""
    with explore_server("--lab-run", str(lab_run)) as url:
        yield url


@pytest.fixture(scope="module")
def browser(chromium_path, server):
    with headless_chromium(chromium_path) as b:
        yield b


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    folder = os.environ.get("POSENC_SCREENSHOT_DIR")
    path = Path(folder) if folder else tmp_path_factory.mktemp("explorer-screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def page(browser, server):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    problems, foreign = [], []
    pg.on("pageerror", lambda err: problems.append(str(err)))
    pg.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)
    pg.on(
        "request",
        lambda req: (
            foreign.append(req.url) if not (req.url.startswith(server) or req.url.startswith("data:")) else None
        ),
    )
    pg.problems, pg.foreign = problems, foreign
    yield pg
    context.close()
    assert foreign == [], f"the page contacted other origins: {foreign}"
    assert problems == [], f"errors in the page: {problems}"


# -- page actions -----------------------------------------------------------------------------------
def open_view(page, server, view):
    from playwright.sync_api import expect

    page.goto(f"{server}#{view}")
    section = page.locator(f"#view-{view}")
    expect(section).to_be_visible()
    expect(section).not_to_have_attribute("data-renders", "0")
    expect(section.locator(".error").first).to_be_hidden()
    return section


def renders(section) -> str:
    return section.get_attribute("data-renders")


def after_change(section, before: str):
    from playwright.sync_api import expect

    expect(section).not_to_have_attribute("data-renders", before)


def value_of(page, selector) -> float:
    from playwright.sync_api import expect

    node = page.locator(selector)
    expect(node).to_be_attached()
    return float(node.get_attribute("data-value"))


def set_slider(page, section, selector, value):
    before = renders(section)
    page.locator(selector).fill(str(value))
    after_change(section, before)


#: per view, (selector, fewest drawn marks): SVG shapes that carry data, or for a canvas, distinct colours
MARKS = {
    "fingerprint": [
        ("canvas#fp-heat", 20),
        ("#fp-seat-bars rect", 64),
        ("#fp-wave path.series", 1),
        ("#fp-wave circle", 32),
        ("canvas#fp-dist", 3),
        ("#fp-dist-scale rect", 32),
        ("canvas.barcode-strip", 5),
    ],
    "dials": [
        (".dial-box[data-pair] line.dial-hand", 16),
        ("#dl-pair-bars rect", 8),
        ("#wo-clocks line.dial-hand", 6),
        ("#wo-clocks path.dial-arc", 2),
    ],
    "scores": [("#sc-chart path.series", 3), ("#sc-alibi path.series", 8)],
    "wavelengths": [("#wl-chart path.series", 3), ("#wl-chart circle", 8), ("#wl-chart rect.band", 2)],
    "alibi": [
        ("#al-slopes rect.bar", 8),
        ("canvas#al-bias", 10),
        ("canvas#al-rope", 10),
        ("#al-bias-scale rect", 32),
        ("#al-rope-scale rect", 32),
    ],
    "precision": [("#pr-chart path.series", 4), ("#pr-pairs circle", 16)],
    "lab": [("#lab-chart path.series", 2), ("#lab-eval td[data-bpb]", 5)],
    "quiz": [(".quiz-card .choice", 18), (".quiz-card .feedback .evidence li", 1)],
    "config": [("#cf-python", 1), ("#cf-hf-new", 1), ("#cf-hf-old", 1)],
}

COUNT_MARKS = """([selector]) => {
  const nodes = [...document.querySelectorAll(selector)];
  if (nodes.length === 1 && nodes[0].tagName === "CANVAS") {
    const c = nodes[0], data = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
    const colours = new Set();
    for (let i = 0; i < data.length; i += 4) colours.add((data[i] << 16) | (data[i + 1] << 8) | data[i + 2]);
    return colours.size;
  }
  if (selector.startsWith("canvas")) return nodes.filter((c) => c.width > 0 && c.height > 0).length;
  return nodes.filter((n) => {
    if (n.tagName === "path") return (n.getAttribute("d") || "").length > 20;
    if (n.tagName === "rect") return Number(n.getAttribute("height")) > 0 && Number(n.getAttribute("width")) > 0;
    if (n.tagName === "PRE") return n.textContent.trim().length > 20;
    if (n.tagName === "line") return Math.hypot(n.x2.baseVal.value - n.x1.baseVal.value,
                                                n.y2.baseVal.value - n.y1.baseVal.value) > 1;
    const box = n.getBoundingClientRect();
    return box.width > 0 && box.height > 0;
  }).length;
}"""


def drawn(page, selector) -> int:
    return page.evaluate(COUNT_MARKS, [selector])


# -- every view renders ------------------------------------------------------------------------------
@pytest.mark.parametrize("view", VIEWS)
def test_each_view_renders_and_is_photographed(page, server, shots, view):
    open_view(page, server, view)
    if view == "dials":
        page.locator("#wo-proof-btn").click()
    if view == "quiz":
        page.locator("#quiz-relative .choice[data-choice='0']").click()
        from playwright.sync_api import expect

        expect(page.locator("#quiz-relative-feedback")).to_be_visible()
    if view == "fingerprint":
        box = page.locator("#fp-heat").bounding_box()
        page.mouse.move(box["x"] + box["width"] * 0.3, box["y"] + box["height"] * 0.2)
        from playwright.sync_api import expect

        expect(page.locator("#fp-cell-value")).to_be_attached()
        expect(page.locator("#fp-wave path.series")).to_have_count(1)
    page.screenshot(path=str(shots / f"{view}.png"), full_page=True)
    assert (shots / f"{view}.png").stat().st_size > 10_000
    for selector, fewest in MARKS[view]:
        assert drawn(page, selector) >= fewest, (view, selector, drawn(page, selector))


# -- 1. fingerprint: slider and hover ---------------------------------------------------------------------
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


# -- 2. dials: a common shift keeps the score; the order proof ----------------------------------------------
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


# -- 3. scores -------------------------------------------------------------------------------------------------
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


# -- 4. wavelengths ------------------------------------------------------------------------------------------------
def test_wavelength_toggles_and_fixture_picker(page, server):
    from playwright.sync_api import expect

    section = open_view(page, server, "wavelengths")
    assert page.locator("#wl-table tr[data-method='ntk']").count() == 0
    before = renders(section)
    page.locator("#wl-methods input[value='ntk']").check()
    after_change(section, before)
    expect(page.locator("#wl-table tr[data-method='ntk']")).to_have_count(1)

    before = renders(section)
    page.locator("#wl-fixture").select_option("llama-3.1-8b")
    after_change(section, before)
    expect(page.locator("#wl-table tr[data-fixture='llama-3.1-8b']")).to_have_count(1)
    expect(page.locator("#wl-caption")).to_contain_text("128 rotated features")
    ratio = Llama3Scaling(8.0, 1.0, 4.0, 8192)
    from posenc.rope.scaling import rope_frequencies

    scaled = rope_frequencies(ratio, 128, 500000.0)[0] / rope_inv_freq(128, 500000.0)
    kept = int((scaled == 1).sum())
    expect(page.locator("#wl-caption")).to_contain_text(f"{kept} pairs kept")


@contextlib.contextmanager
def in_process_server():
    """The explorer served by uvicorn in a thread of this process, so a scaling this test registers is
    in the server's registry too; yields its base URL."""
    import threading

    import uvicorn

    from posenc.explorer.app import create_app

    server = uvicorn.Server(uvicorn.Config(create_app(), host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        for _ in range(600):
            if server.started:
                break
            threading.Event().wait(0.05)
        assert server.started, "uvicorn did not start"
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}/"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def test_a_registered_scaling_with_a_parameter_of_its_own_gets_a_slider(browser):
    """A toy scaling registered here, with a parameter no posenc scaling has, is drawn with a slider
    made from its ``Parameter`` (range, step, label) and no other change; moving the slider moves its
    curve to the library's numbers."""
    from playwright.sync_api import expect
    from test_scaling_registry import TILT, TiltScaling, tilt_frequencies

    from posenc.rope import register_scaling, unregister_scaling

    register_scaling(TILT)
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        with in_process_server() as url:
            page = context.new_page()
            problems = []
            page.on("pageerror", lambda err: problems.append(str(err)))
            section = open_view(page, url, "wavelengths")
            floor = page.locator("#wl-param-tilt_floor")
            expect(floor).to_have_attribute("min", "1")
            expect(floor).to_have_attribute("max", "4")
            expect(floor).to_have_attribute("step", "0.5")
            expect(page.locator("#wl-params label", has=floor)).to_contain_text("tilt floor (toy)")
            expect(page.locator("#wl-param-factor")).to_have_count(1)  # one factor slider for every type
            before = renders(section)
            page.locator("#wl-methods input[value='tilt']").check()
            after_change(section, before)
            set_slider(page, section, "#wl-param-tilt_floor", 3)
            expect(page.locator("#wl-param-tilt_floor-out")).to_have_text("3")
            shown = value_of(page, "#wl-readout [data-series='tilt']")  # pair 0
            want = 2 * math.pi / float(tilt_frequencies(TiltScaling(8.0, tilt_floor=3.0), 16, 10000.0)[0][0])
            assert shown == pytest.approx(want, rel=1e-12) and want == pytest.approx(6 * math.pi, rel=1e-12)
            assert problems == []
    finally:
        context.close()
        unregister_scaling("tilt")


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
    before = renders(section)
    page.locator("#wl-fixture").select_option("phi-3.5-mini-instruct")
    after_change(section, before)
    names = [p.get_attribute("data-name") for p in section.locator("#wl-chart path.series").all()]
    assert any(n.startswith("short factors") for n in names) and any(n.startswith("long factors") for n in names)
    expect(page.locator("#wl-table tr[data-fixture]")).to_contain_text("not stated")
    expect(page.locator("#wl-caption")).not_to_contain_text("kept")


# -- 5. ALiBi ---------------------------------------------------------------------------------------------------------
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


# -- 6. precision ----------------------------------------------------------------------------------------------------
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


# -- 7. lab ------------------------------------------------------------------------------------------------------------
def test_lab_view_shows_the_run(page, server):
    section = open_view(page, server, "lab")
    assert section.locator("#lab-chart path.series").count() == 2
    cells = section.locator("#lab-eval td[data-bpb]")
    assert sorted(float(c.get_attribute("data-bpb")) for c in cells.all()) == [2.25, 2.3, 2.35, 2.4, 2.75]
    assert section.locator("#lab-eval td.missing", has_text="cannot").count() == 1
    ext = section.locator("#lab-ext td[data-bpb='2.4']")
    assert ext.count() == 1 and "ft 2.310" in ext.text_content()
    assert section.locator("#lab-verdicts li.seen").count() == 2
    set_slider(page, section, "#lab-points", 64)  # averaged into 64 buckets
    assert section.locator("#lab-chart path.series").count() == 2


# -- 8. knowledge checks -----------------------------------------------------------------------------------------------
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


# -- 9. copy as config -------------------------------------------------------------------------------------------------
def test_copy_as_config_matches_posenc_hf(page, server):
    from playwright.sync_api import expect

    section = open_view(page, server, "config")
    before = renders(section)
    page.locator("#cf-method").select_option("llama3")
    after_change(section, before)
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
    before = renders(section)
    page.locator("#cf-method").select_option("ntk")
    after_change(section, before)
    shown = json.loads(page.locator("#cf-hf-new").text_content())
    assert shown["rope_parameters"]["rope_type"] == "default"
    assert shown["rope_parameters"]["rope_theta"] == pytest.approx(10000.0 * 8.0 ** (16 / 14), rel=1e-12)
    old_style = json.loads(page.locator("#cf-hf-old").text_content())
    assert old_style["rope_scaling"] is None
    expect(page.locator("#cf-hf-note")).to_be_visible()
    expect(page.locator("#cf-hf-note")).to_contain_text("no static NTK")
    expect(page.locator("#cf-python")).to_contain_text("'rope_type': 'ntk'")


# -- linked settings and bad input -------------------------------------------------------------------------------------
def test_global_rope_settings_drive_the_views_and_bad_values_show_the_api_message(page, server):
    from playwright.sync_api import expect

    section = open_view(page, server, "dials")
    before = renders(section)
    page.locator("#g-head-dim").select_option("8")
    after_change(section, before)
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


# -- workbench defects: every one has a test --------------------------------------------------------------------------
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
        before = renders(section)
        page.locator("#g-head-dim").select_option(head_dim)
        after_change(section, before)
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


def test_heatmaps_have_axis_ticks(page, server):
    open_view(page, server, "fingerprint")
    ticks = page.locator("#view-fingerprint .heat-axes").first.locator(".heat-yticks .heat-tick")
    assert ticks.count() >= 3 and ticks.first.text_content() == "0"
    assert page.locator("#view-fingerprint .heat-axes").count() == 2  # the table and the distances
    open_view(page, server, "alibi")
    for canvas in ("al-bias", "al-rope"):
        grid = page.locator(f"#{canvas}").locator("xpath=..")
        assert "heat-axes" in grid.get_attribute("class")
        assert grid.locator(".heat-xticks .heat-tick").count() >= 3


TAB_BOXES = """() => [...document.querySelectorAll('nav.tabs a')].map((a) => {
  const b = a.getBoundingClientRect(); return [a.dataset.view, b.left, b.right, b.top]; })"""


@pytest.mark.parametrize("width", [1440, 1400, 1280, 390])
def test_every_tab_starts_on_screen(browser, server, width):
    """Every view's tab is on screen when the page opens (at 1400 px the eval tab was scrolled out of
    sight); from 1400 px up the tabs are one row."""
    context = browser.new_context(viewport={"width": width, "height": 900})
    pg = context.new_page()
    pg.goto(f"{server}#fingerprint")
    pg.wait_for_selector("body[data-ready=true]")
    tabs = pg.evaluate(TAB_BOXES)
    scroll = pg.evaluate("() => document.documentElement.scrollWidth")
    context.close()
    assert len(tabs) == 10 and tabs[-1][0] == "eval"
    for view, left, right, _ in tabs:
        assert 0 <= left and right <= width, (view, left, right)
    assert scroll <= width
    if width >= 1400:
        tops = [top for *_, top in tabs]
        assert max(tops) - min(tops) < 1


def test_dial_focus_is_visible(page, server):
    open_view(page, server, "dials")
    page.locator("#dl-seed").focus()
    for _ in range(40):  # keyboard only, to the first dial
        page.keyboard.press("Tab")
        if page.evaluate("() => document.activeElement.matches('.dial-box[data-pair]')"):
            break
    style = page.evaluate("""() => { const s = getComputedStyle(document.activeElement);
        return [document.activeElement.dataset.pair, s.outlineStyle, parseFloat(s.outlineWidth)]; }""")
    assert style[0] == "0" and style[1] != "none" and style[2] >= 2


def test_the_bag_of_words_check_comes_first(page, server):
    open_view(page, server, "quiz")
    first = page.locator(".quiz-card").first
    assert first.get_attribute("data-check") == "bag-of-words"


def test_the_lessons_factor_slider_takes_the_registrys_range(page, server):
    """The lesson's factor slider takes the registry's range and step, opens on the chapter's default
    (the factor its text measures), and its ends are answered."""
    from playwright.sync_api import expect

    from posenc.lesson.chapters.stretching_rope import FACTOR
    from posenc.rope.registry import scaling_parameters

    p = scaling_parameters()["factor"]
    page.goto(f"{server}#stretching-rope")
    node = page.locator("#ch-stretching-rope")
    expect(node).not_to_have_attribute("data-renders", "0", timeout=20_000)
    expect(page.locator("#str-table caption")).to_contain_text(f"(factor {FACTOR:g})")
    shown = page.evaluate("() => ['min', 'max', 'step', 'value'].map((k) => document.getElementById('str-factor')[k])")
    assert [float(v) for v in shown] == [p.minimum, p.maximum, p.step, FACTOR]
    for value in (p.maximum, p.minimum):
        before = node.get_attribute("data-renders")
        page.locator("#str-factor").fill(str(value))
        expect(node).not_to_have_attribute("data-renders", before)
        expect(page.locator("#str-table caption")).to_contain_text(f"(factor {value:g})")
        expect(node.locator(".error").first).to_be_hidden()


# -- a 390 px phone ----------------------------------------------------------------------------------------------------
PHONE_VIEWS = ("fingerprint", "dials", "scores", "alibi", "precision", "quiz", "wavelengths", "lab")

PHONE_LAYOUT = """() => {
  const small = [];
  for (const t of document.querySelectorAll(".view:not([hidden]) svg text")) {
    const svg = t.ownerSVGElement, vb = svg.viewBox.baseVal, box = svg.getBoundingClientRect();
    if (!vb || !vb.width || !box.width || !t.textContent.trim()) continue;
    const px = parseFloat(getComputedStyle(t).fontSize) * box.width / vb.width;
    if (px < 10.95) small.push([t.textContent, px]);
  }
  const wide = [...document.querySelectorAll("header .rope-settings, .quiz-card, .view:not([hidden]) .panel")]
    .filter((n) => n.getBoundingClientRect().right > window.innerWidth + 0.5).map((n) => n.className);
  return { scroll: document.documentElement.scrollWidth, inner: window.innerWidth, small, wide };
}"""


@pytest.fixture
def phone(browser, server):
    context = browser.new_context(viewport={"width": 390, "height": 844}, has_touch=True, is_mobile=True)
    pg = context.new_page()
    problems = []
    pg.on("pageerror", lambda err: problems.append(str(err)))
    yield pg
    context.close()
    assert problems == []


@pytest.mark.parametrize("view", PHONE_VIEWS)
def test_workbench_fits_a_phone_with_readable_chart_text(phone, server, view):
    open_view(phone, server, view)
    if view == "quiz":
        phone.locator("#quiz-bag-of-words .choice[data-choice='0']").tap()
        from playwright.sync_api import expect

        expect(phone.locator("#quiz-bag-of-words-feedback")).to_be_visible()
    layout = phone.evaluate(PHONE_LAYOUT)
    assert layout["scroll"] <= layout["inner"], layout
    assert layout["wide"] == [], layout["wide"]
    assert layout["small"] == [], layout["small"][:5]


def test_tapping_the_heatmap_shows_a_cells_formula(phone, server):
    from playwright.sync_api import expect

    open_view(phone, server, "fingerprint")
    canvas = phone.locator("#fp-heat")
    box = canvas.bounding_box()
    rows, cols = int(canvas.get_attribute("data-rows")), int(canvas.get_attribute("data-cols"))
    canvas.tap(position={"x": 10.5 * box["width"] / cols, "y": 7.5 * box["height"] / rows})
    cell = phone.locator("#fp-cell-value")
    expect(cell).to_have_attribute("data-dim", "10")
    expect(cell).to_have_attribute("data-pos", "7")
    assert float(cell.get_attribute("data-value")) == float(sinusoidal_table(64, 64)[7, 10])
    open_view(phone, server, "alibi")
    bias = phone.locator("#al-bias")
    box = bias.bounding_box()
    bias.tap(position={"x": 1.5 * box["width"] / 16, "y": 5.5 * box["height"] / 16})
    expect(phone.locator("#al-bias-hover")).to_have_attribute("data-row", "5")


def test_slope_labels_fit_for_any_head_count(page, server):
    section = open_view(page, server, "alibi")
    set_slider(page, section, "#al-heads", 16)  # the axis starts at 2^-8.5 = 0.00276...
    boxes = page.evaluate("""() => { const svg = document.querySelector('#al-slopes svg').getBoundingClientRect();
      return [...document.querySelectorAll('#al-slopes text.bar-tick')].map((t) => {
        const b = t.getBoundingClientRect(); return [t.textContent, b.left - svg.left]; }); }""")
    assert [text for text, _ in boxes] == ["2^−0.5", "2^−8.5"]
    assert all(left >= 0 for _, left in boxes), boxes


CLIPPED = """() => [...document.querySelectorAll(".view:not([hidden]) svg text")].filter((t) => {
  const svg = t.ownerSVGElement.getBoundingClientRect(), b = t.getBoundingClientRect();
  return t.textContent.trim() && b.width > 0 && (b.left < svg.left - 0.5 || b.right > svg.right + 0.5);
}).map((t) => t.textContent)"""


@pytest.mark.parametrize("view", ["fingerprint", "dials", "scores", "alibi", "precision", "wavelengths", "lab"])
def test_no_chart_label_is_cut_at_the_edge(page, phone, server, view):
    for pg in (page, phone):
        open_view(pg, server, view)
        assert pg.evaluate(CLIPPED) == [], (view, pg.viewport_size)


# -- one resize mechanism for views and chapters ------------------------------------------------------------
SVG_WIDTH = "(sel) => { const s = document.querySelector(sel); return s ? s.viewBox.baseVal.width : null; }"


def test_one_resize_mechanism_redraws_views_and_chapters_hidden_during_the_resize(page, server):
    """A view or a chapter that is off screen while the window narrows is drawn at its panel's new
    width when it is shown again, and the one on screen is redrawn at once."""
    from playwright.sync_api import expect

    def open_chapter(chapter):
        page.goto(f"{server}#{chapter}")
        node = page.locator(f"#ch-{chapter}")
        expect(node).to_be_visible()
        expect(node).not_to_have_attribute("data-renders", "0", timeout=20_000)

    def narrow(selector):
        page.wait_for_function(f"() => ({SVG_WIDTH})({json.dumps(selector)}) <= 390", timeout=10_000)

    open_view(page, server, "scores")
    assert page.evaluate(SVG_WIDTH, "#view-scores svg") > 390
    open_chapter("bag-of-tiles")
    assert page.evaluate(SVG_WIDTH, "#ch-bag-of-tiles svg.lesson-svg") > 390
    open_chapter("word-plus-position")
    page.set_viewport_size({"width": 390, "height": 844})
    narrow("#ch-word-plus-position svg.lesson-svg")  # on screen: redrawn after the resize
    open_chapter("bag-of-tiles")
    narrow("#ch-bag-of-tiles svg.lesson-svg")  # hidden during the resize: redrawn when shown
    page.goto(f"{server}#scores")
    expect(page.locator("#view-scores")).to_be_visible()
    narrow("#view-scores svg")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390


FIGURE_WIDTHS = """() => {
  const content = (n) => { const s = getComputedStyle(n);
    return n.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight); };
  const out = [];
  for (const n of document.querySelectorAll('.view:not([hidden]) svg, .view:not([hidden]) canvas')) {
    if (n.parentElement.closest('svg') || n.matches('.legend svg')) continue;  // a legend's swatch is no figure
    const shown = n.getBoundingClientRect();
    if (!shown.width) continue;
    const panel = n.closest('.panel') || n.closest('.view'), room = panel.getBoundingClientRect();
    const style = getComputedStyle(panel);
    out.push({ figure: n.id || n.getAttribute('class'), holder: n.parentElement.id || n.parentElement.className,
      tag: n.tagName, drawn: n.tagName === 'svg' ? n.viewBox.baseVal.width : n.width, shown: shown.width,
      holderWidth: content(n.parentElement), overflow: shown.right - (room.right - parseFloat(style.paddingRight)) });
  }
  return out;
}"""


@pytest.mark.parametrize("width", [1440, 390])
def test_every_figure_is_drawn_at_its_holders_width(browser, server, width):
    """One sizing rule (charts.js widthOf): every SVG figure of every view is drawn at its holder's
    content width, so it is neither scaled by CSS (text keeps its size) nor narrower than its holder;
    a canvas (pixels scaled by CSS) stays inside its panel and fills at least half its holder."""
    context = browser.new_context(viewport={"width": width, "height": 900})
    pg = context.new_page()
    try:
        for view in ("fingerprint", "dials", "scores", "wavelengths", "alibi", "precision", "lab"):
            open_view(pg, server, view)
            figures = pg.evaluate(FIGURE_WIDTHS)
            assert figures, view
            for f in figures:
                assert f["overflow"] <= 1, (view, f)
                if f["tag"] == "svg":
                    assert abs(f["drawn"] - f["shown"]) <= 1 and abs(f["shown"] - f["holderWidth"]) <= 1, (view, f)
                else:
                    assert f["shown"] >= 0.5 * f["holderWidth"], (view, f)
    finally:
        context.close()


def test_a_view_drawn_while_hidden_is_redrawn_at_its_width_when_shown(page, server):
    """Data that arrives while its view is hidden is drawn at a fallback width (a hidden holder has
    none); widthOf marks the holder, and showing the view redraws it at its holder's width."""
    from playwright.sync_api import expect

    open_view(page, server, "scores")
    holder = page.evaluate("() => document.getElementById('sc-chart').clientWidth")
    page.goto(f"{server}#dials")
    expect(page.locator("#view-scores")).to_be_hidden()
    page.evaluate("async () => { const core = await import('/static/core.js'); core.registry.scores.refresh(0); }")
    expect(page.locator("#sc-chart")).to_have_attribute("data-unsized", "true")
    hidden_width = page.evaluate(SVG_WIDTH, "#sc-chart svg")
    assert hidden_width != holder
    page.goto(f"{server}#scores")
    page.wait_for_function(f"() => ({SVG_WIDTH})('#sc-chart svg') === {holder}", timeout=10_000)
    expect(page.locator("#sc-chart")).not_to_have_attribute("data-unsized", "true")


def test_one_registry_holds_every_view_and_every_chapter(page, server):
    """Views and chapters register in one registry (core.js) and load through one loader: every panel
    of the page is registered once, as a view (refresh) or a chapter (setup)."""
    open_view(page, server, "fingerprint")
    found = page.evaluate("""async () => {
      const core = await import('/static/core.js');
      const panels = [...document.querySelectorAll('section.view, #lesson-main > article.chapter')];
      return {
        views: panels.filter((n) => n.matches('.view')).map((n) => n.id.slice(5)),
        chapters: panels.filter((n) => n.matches('.chapter')).map((n) => n.dataset.chapter),
        registered: Object.values(core.registry).map((e) => [e.name, core.isView(e.name), e.node.id]),
      };
    }""")
    registered = {name: (view, node) for name, view, node in found["registered"]}
    assert len(registered) == len(found["registered"])
    assert {n for n, (v, _) in registered.items() if v} == set(found["views"])
    assert {n for n, (v, _) in registered.items() if not v} == set(found["chapters"])
    assert len(found["chapters"]) >= 14 and set(VIEWS) <= set(found["views"])
    assert all(node in (f"view-{n}", f"ch-{n}") for n, (_, node) in registered.items())


def test_order_proof_says_why_its_scores_are_not_chapter_sevens(page, server):
    """The proof's scores come from each word's own vector, ch. 7's from one fixed pair: the proof says so
    and prints ch. 7's pair at its seats, which at +30/-30 degrees is ch. 7's printed score."""
    from playwright.sync_api import expect

    from posenc.lesson.chapters import rope

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
