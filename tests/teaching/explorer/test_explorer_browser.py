"""The explorer in a real headless Chromium, driven by Playwright, against a real server.

The test starts ``posenc explore`` as a subprocess (the same command a user types), opens every
view, fits it to a phone and to its panel's width, and redraws it on resize; the numbers of each view
are checked in ``test_explorer_views_browser``. A screenshot of every view lands in
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

import pytest
from browser_support import after_change, open_view, renders, set_slider, value_of

from posenc.sinusoidal import sinusoidal_table

pytestmark = pytest.mark.slow  # a real server and a real browser: seconds per test


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


VIEWS = ("fingerprint", "dials", "scores", "wavelengths", "alibi", "precision", "lab", "quiz", "config")


@pytest.fixture(scope="module")
def lab_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("lab-run")
    losses = [3.0 - 0.5 * math.exp(-i / 40) for i in range(256)] + [3.4 + i / 400 for i in range(256)]
    (run / "results.json").write_text(
        json.dumps(
            {
                "schema_version": 2,
                "kind": "results",  # posenc.measuring.lab.schema's stamp
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
def explore_args(lab_run):
    """The module's server (``conftest.server``) serves the lab run above."""
    return ("--lab-run", str(lab_run))


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


@contextlib.contextmanager
def in_process_server():
    """The explorer served by uvicorn in a thread of this process, so a scaling this test registers is
    in the server's registry too; yields its base URL."""
    import threading

    import uvicorn

    from posenc.teaching.explorer.app import create_app

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


def test_a_registered_scaling_with_a_parameter_of_its_own_gets_a_slider(browser, monkeypatch):
    """A toy scaling registered here, with a parameter no posenc scaling has, is drawn with a slider
    made from its ``Parameter`` (range, step) and its label in the palette, and no other change;
    moving the slider moves its curve to the library's numbers."""
    from playwright.sync_api import expect
    from tilt_scaling import TILT, TiltScaling, tilt_frequencies

    from posenc.rope import register_scaling, unregister_scaling
    from posenc.teaching.lesson import palette

    monkeypatch.setitem(palette.SCALING_PARAMETER_LABELS, "tilt_floor", "tilt floor (toy)")
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

    from posenc.rope.registry import scaling_parameters
    from posenc.teaching.lesson.chapters.stretching_rope import FACTOR

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

        # the first answer of a fresh server may wait for torch's one-time imports (see warm_up)
        expect(phone.locator("#quiz-bag-of-words-feedback")).to_be_visible(timeout=20_000)
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
