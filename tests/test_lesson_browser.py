"""The guided lesson in a real headless Chromium (Playwright) against a real ``posenc explore`` server.

At a desktop size (1440x900) and a phone size (390x844) every chapter is opened by its URL hash and
must render, fit the width of the screen, keep chart text at 11 px or more, give its figure a text
alternative, change its figure when its main control moves, and pass axe-core with no serious or
critical violation. Keyboard-only use must reach every control, and the arrow keys turn the pages.
Screenshots of each chapter at both sizes land in ``$POSENC_SCREENSHOT_DIR`` (default: a folder
under pytest's temporary directory), never in the repository.

The browser is the system Chromium, or ``$POSENC_CHROMIUM`` (Playwright never downloads one). Without
it these tests skip, unless ``POSENC_REQUIRE_BROWSER=1`` (set in CI) turns the skip into a failure.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from browser_support import chromium_or_skip, explore_server, headless_chromium

from posenc.explorer.lesson import CHAPTERS

pytestmark = pytest.mark.slow

SIZES = {"desktop": (1440, 900), "phone": (390, 844)}
IDS = [c.id for c in CHAPTERS]


@pytest.fixture(scope="module")
def chromium_path():
    return chromium_or_skip()


@pytest.fixture(scope="module")
def server(chromium_path):
    """``posenc explore --port 0`` in a subprocess; yields its base URL."""
    with explore_server() as url:
        yield url


@pytest.fixture(scope="module")
def browser(chromium_path, server):
    with headless_chromium(chromium_path) as b:
        yield b


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    folder = os.environ.get("POSENC_SCREENSHOT_DIR")
    path = Path(folder) if folder else tmp_path_factory.mktemp("lesson-screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


def new_page(browser, server, size):
    width, height = size
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    problems = []
    page.on("pageerror", lambda err: problems.append(f"page error: {err}"))
    page.on("console", lambda msg: problems.append(f"console: {msg.text}") if msg.type == "error" else None)
    # a request the page cancels itself (a slider moved on before the answer came) is not a failure
    page.on(
        "requestfailed",
        lambda req: (
            problems.append(f"failed request: {req.url} ({req.failure})")
            if "ERR_ABORTED" not in (req.failure or "")
            else None
        ),
    )
    page.on("response", lambda r: problems.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
    page.on(
        "request",
        lambda req: (
            problems.append(f"other origin: {req.url}")
            if not (req.url.startswith(server) or req.url.startswith("data:"))
            else None
        ),
    )
    page.problems = problems
    return context, page


def settled_box(page, selector, tries=50):
    """The bounding box of ``selector`` once two reads 0.1 s apart agree (a redraw replaces the node)."""
    last = None
    for _ in range(tries):
        box = page.locator(selector).bounding_box()
        if box is not None and box == last:
            return box
        last = box
        page.wait_for_timeout(100)
    raise AssertionError(f"{selector} did not settle: last box {last}")


def open_chapter(page, server, chapter):
    from playwright.sync_api import expect

    page.goto(f"{server}#{chapter}")
    node = page.locator(f"#ch-{chapter}")
    expect(node).to_be_visible()
    expect(node).not_to_have_attribute("data-renders", "0", timeout=20_000)
    expect(node.locator(".error").first).to_be_hidden()
    return node


# What a figure shows: its drawing, its numbers, its tables and printed output.
FIGURE_STATE = """(id) => {
  const ch = document.getElementById('ch-' + id);
  return [...ch.querySelectorAll('.fig-box, .numbers, .table-wrap, .code-output, .result-box, .proof-box, '
    + '.dials-row, .feedback, .matrix-box')].map((n) => n.innerHTML).join('|');
}"""

# Chart text as rendered: font size times the SVG's scale on screen.
SMALL_TEXT = """(id) => {
  const ch = document.getElementById('ch-' + id), small = [];
  for (const t of ch.querySelectorAll('svg text')) {
    if (!t.textContent.trim() || t.getBoundingClientRect().width === 0) continue;
    const owner = t.ownerSVGElement, box = owner.viewBox.baseVal;
    const scale = box && box.width ? owner.getBoundingClientRect().width / box.width : 1;
    const size = parseFloat(getComputedStyle(t).fontSize) * scale;
    if (size < 10.95) small.push(`${t.textContent.trim()} (${size.toFixed(1)} px)`);
  }
  return small;
}"""

TEXT_ALTERNATIVES = """(id) => {
  const ch = document.getElementById('ch-' + id), missing = [];
  for (const fig of ch.querySelectorAll('figure.lesson-fig')) {
    const words = [...fig.querySelectorAll('.numbers, table, pre, .result-box')].map((n) => n.textContent).join(' ');
    if (!/\\d/.test(words)) missing.push(fig.getAttribute('aria-labelledby'));
    for (const s of fig.querySelectorAll('svg.lesson-svg, svg.chart'))
      if (!s.getAttribute('aria-label'))
        missing.push('svg without aria-label in ' + fig.getAttribute('aria-labelledby'));
  }
  return missing;
}"""


def move_primary_control(page, chapter):
    """Moves the chapter's main control to another value; returns a description of the move."""
    control = page.locator(f"#ch-{chapter} [data-primary]").first
    control.wait_for(state="attached", timeout=20_000)
    tag = control.evaluate("(n) => n.tagName.toLowerCase()")
    kind = control.get_attribute("type") or ""
    if tag == "input" and kind == "range":
        low, high, value = (float(control.get_attribute(a) or 0) for a in ("min", "max", "value"))
        value = float(control.input_value())
        target = high if value != high else low
        step = control.get_attribute("step")
        shown = str(int(target)) if not step or float(step).is_integer() else str(target)
        control.fill(shown)
        return f"{control.get_attribute('id')} -> {shown}"
    if tag == "select":
        options = control.locator("option")
        current = control.input_value()
        other = next(
            options.nth(i).get_attribute("value") or options.nth(i).inner_text()
            for i in range(options.count())
            if (options.nth(i).get_attribute("value") or options.nth(i).inner_text()) != current
        )
        control.select_option(other)
        return f"{control.get_attribute('id')} -> {other}"
    control.click()
    return f"clicked {control.inner_text()[:30]!r}"


def axe_serious(page, chapter):
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page, context=f"#ch-{chapter}")
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:3]}"
        for v in results.response["violations"]
        if v["impact"] in ("serious", "critical")
    ]


@pytest.mark.parametrize("size", list(SIZES))
def test_every_chapter_renders_fits_reacts_and_passes_axe(browser, server, shots, size):
    from playwright.sync_api import expect

    width, height = SIZES[size]
    context, page = new_page(browser, server, SIZES[size])
    failures = []
    try:
        for number, chapter in enumerate(IDS, start=1):
            node = open_chapter(page, server, chapter)
            expect(page.locator("#progress-text")).to_contain_text(f"Chapter {number} of {len(IDS)}")
            page.wait_for_timeout(150)  # let late figures of the chapter settle
            scroll = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
            if scroll[0] > scroll[1]:
                failures.append(f"{chapter}: page {scroll[0]} px wide in a {scroll[1]} px window")
            small = page.evaluate(SMALL_TEXT, chapter)
            if small:
                failures.append(f"{chapter}: chart text under 11 px: {small[:5]}")
            missing = page.evaluate(TEXT_ALTERNATIVES, chapter)
            if missing:
                failures.append(f"{chapter}: figures without a text alternative: {missing}")
            page.screenshot(path=str(shots / f"lesson-{number:02d}-{chapter}-{width}x{height}.png"), full_page=True)
            violations = axe_serious(page, chapter)
            if violations:
                failures.append(f"{chapter}: axe: {violations}")

            before, renders = page.evaluate(FIGURE_STATE, chapter), node.get_attribute("data-renders")
            moved = move_primary_control(page, chapter)
            expect(node).not_to_have_attribute("data-renders", renders, timeout=20_000)
            expect(node.locator(".error").first).to_be_hidden()
            if page.evaluate(FIGURE_STATE, chapter) == before:
                failures.append(f"{chapter}: the figure did not change after {moved}")
            scroll = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
            if scroll[0] > scroll[1]:
                failures.append(f"{chapter} after {moved}: page {scroll[0]} px wide in a {scroll[1]} px window")
        assert not failures, "\n".join(failures)
        assert page.problems == [], page.problems
    finally:
        context.close()


KEYBOARD_SWEEP = """(id) => {
  const ch = document.getElementById('ch-' + id);
  const controls = [...ch.querySelectorAll('a[href], button, input, select, textarea, [tabindex]:not([tabindex="-1"])')]
    .filter((n) => !n.disabled && n.getClientRects().length > 0);
  controls.forEach((n, i) => n.setAttribute('data-kb', String(i)));
  return controls.length;
}"""


def test_keyboard_alone_reaches_every_control_and_turns_pages(browser, server):
    from playwright.sync_api import expect

    context, page = new_page(browser, server, SIZES["desktop"])
    unreached = {}
    try:
        for chapter in IDS:
            node = open_chapter(page, server, chapter)
            if chapter == "knowledge-checks":
                expect(node.locator(".check-card .choice").first).to_be_visible()
            page.wait_for_timeout(150)
            count = page.evaluate(KEYBOARD_SWEEP, chapter)
            assert count > 0, chapter
            page.locator("#lesson-main").focus()
            seen = set()
            for _ in range(count + 40):
                page.keyboard.press("Tab")
                mark = page.evaluate("() => document.activeElement && document.activeElement.getAttribute('data-kb')")
                if mark is not None:
                    seen.add(int(mark))
                if len(seen) == count:
                    break
                # a visible focus indicator on every control reached
                outline = page.evaluate("""() => { const s = getComputedStyle(document.activeElement);
                  return s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 2 || s.boxShadow !== 'none'; }""")
                assert outline, (chapter, page.evaluate("() => document.activeElement.outerHTML.slice(0, 120)"))
            missed = sorted(set(range(count)) - seen)
            if missed:
                unreached[chapter] = [
                    page.evaluate(f"() => document.querySelector('[data-kb=\"{i}\"]').outerHTML.slice(0, 100)")
                    for i in missed[:5]
                ]
        assert not unreached, unreached

        # arrow keys turn the pages (when no control has the focus), and the hash follows
        open_chapter(page, server, IDS[0])
        page.evaluate("() => document.activeElement.blur()")
        page.keyboard.press("ArrowRight")
        expect(page.locator(f"#ch-{IDS[1]}")).to_be_visible()
        assert page.evaluate("() => window.location.hash") == f"#{IDS[1]}"
        page.keyboard.press("ArrowLeft")
        expect(page.locator(f"#ch-{IDS[0]}")).to_be_visible()
        # ... but not while a slider has the focus: there the arrows move the slider
        open_chapter(page, server, "word-plus-position")
        page.locator("#input-seat").focus()
        page.keyboard.press("ArrowRight")
        expect(page.locator("#input-seat-out")).to_have_text("4")
        assert page.evaluate("() => window.location.hash") == "#word-plus-position"
        assert page.problems == [], page.problems
    finally:
        context.close()


def test_deep_links_progress_checks_and_the_workbench(browser, server):
    from playwright.sync_api import expect

    context, page = new_page(browser, server, SIZES["phone"])
    try:
        page.goto(server)  # the landing page is the lesson
        expect(page.locator(f"#ch-{IDS[0]}")).to_be_visible()
        expect(page.locator("#workbench")).to_be_hidden()

        # a knowledge check answered in chapter 1 counts on the review page
        page.locator("#lq-bag-of-words .choice[data-choice='0']").click()
        feedback = page.locator("#lq-bag-of-words-feedback")
        expect(feedback).to_have_attribute("data-correct", "true")
        expect(feedback.locator(".evidence li").first).to_contain_text("differs between the two sentences")
        open_chapter(page, server, "knowledge-checks")
        expect(page.locator("#lq-total")).to_contain_text("1 of 10 checks answered, 1 right")
        number = IDS.index("knowledge-checks") + 1
        expect(page.locator("#progress-text")).to_contain_text(
            f"Chapter {number} of {len(IDS)} · 2 of {len(IDS)} opened"
        )

        # RoPE: the vector can be moved by keyboard and by dragging, the turn is drawn with a ghost hand
        node = open_chapter(page, server, "rope")
        expect(page.locator("#rope-dials .ghost-hand")).to_have_count(8)
        expect(page.locator("#rope-dials .hand")).to_have_count(8)
        matrix = page.locator("#rot-matrix")
        before = matrix.inner_text()
        page.locator("#rot-plane .drag-handle").focus()
        page.keyboard.press("ArrowUp")
        expect(page.locator("#rot-b")).to_have_value("0.6")
        expect(matrix).not_to_have_text(before)
        # the chapter's other figures may still be loading and redraw the plane: measure once it is still
        handle = settled_box(page, "#rot-plane .drag-handle")
        plane = settled_box(page, "#rot-plane svg")
        page.mouse.move(handle["x"] + handle["width"] / 2, handle["y"] + handle["height"] / 2)
        page.mouse.down()
        page.mouse.move(plane["x"] + plane["width"] * 0.3, plane["y"] + plane["height"] * 0.3, steps=4)
        page.mouse.up()
        expect(page.locator("#rot-a")).to_have_value(re.compile(r"^-"))  # dragged left of the b axis
        # the "rotate" button swaps the nouns and the turn from dog to bit changes sign
        numbers = page.locator("#order-numbers")
        expect(numbers).to_contain_text("+30°")
        page.locator("#order-rotate").click()
        expect(numbers).to_contain_text("−30°")
        expect(page.locator("#order-rotate")).to_have_attribute("aria-pressed", "true")
        assert node.is_visible()

        # the workbench keeps its views, with deep links of their own
        page.goto(f"{server}#dials")
        expect(page.locator("#workbench")).to_be_visible()
        expect(page.locator("#lesson")).to_be_hidden()
        expect(page.locator("#view-dials")).to_be_visible()
        page.goto(f"{server}#workbench")
        expect(page.locator("#view-fingerprint")).to_be_visible()
        page.locator("#mode-lesson").click()
        expect(page.locator(f"#ch-{IDS[0]}")).to_be_visible()
        assert page.problems == [], page.problems
    finally:
        context.close()


# -- claim tests: each does what a sentence of the lesson says and asserts what it claims --------------
def hand_angles(page, selector):
    """``data-hand-deg`` of every element matching ``selector``, in page order."""
    return page.eval_on_selector_all(selector, "(ns) => ns.map((n) => Number(n.dataset.handDeg))")


def set_slider(page, node, selector, value):
    """Sets a range input and waits for the chapter to render the new value."""
    from playwright.sync_api import expect

    renders = node.get_attribute("data-renders")
    page.locator(selector).fill(str(value))
    expect(node).not_to_have_attribute("data-renders", renders, timeout=20_000)
    page.wait_for_timeout(200)  # a second figure of the chapter may still be on its way


def test_claim_moving_both_seats_turns_every_hand_and_keeps_the_score(browser, server):
    """Chapter 7: "drag move both by: every hand turns, yet the score under the dials stays the same"."""
    context, page = new_page(browser, server, SIZES["desktop"])
    try:
        node = open_chapter(page, server, "rope")
        set_slider(page, node, "#rope-shift", 100)
        before = hand_angles(page, "#rope-dials .dial-card")
        score = page.locator("#rope-score").inner_text()
        set_slider(page, node, "#rope-shift", 500)
        after = hand_angles(page, "#rope-dials .dial-card")
        assert len(before) == len(after) == 8
        turned = [abs(((a - b + 180) % 360) - 180) for a, b in zip(after, before)]
        assert all(t > 1e-3 for t in turned), f"hands that did not turn: {turned}"
        assert page.locator("#rope-score").inner_text() == score
        assert re.fullmatch(r"−?\d+\.\d{7}", score), score
        assert page.problems == [], page.problems
    finally:
        context.close()


def test_claim_who_bit_whom_is_plus_then_minus_30_degrees_on_four_dials(browser, server):
    """Chapter 7: seats 0-3 at 0°, 30°, 60°, 90°; dog to bit is +30° in A and −30° in B."""
    from playwright.sync_api import expect

    context, page = new_page(browser, server, SIZES["phone"])
    try:
        open_chapter(page, server, "rope")
        expect(page.locator("#order-turn")).to_have_text("+30°")
        assert hand_angles(page, "#order-figure .clock") == [0, 30, 60, 90]
        words = page.eval_on_selector_all("#order-figure .clock", "(ns) => ns.map((n) => n.dataset.word)")
        assert words == ["the", "dog", "bit", "man"]
        button = page.locator("#order-rotate")
        assert "sentence B" in button.inner_text()
        button.click()
        expect(page.locator("#order-turn")).to_have_text("−30°")
        words = page.eval_on_selector_all("#order-figure .clock", "(ns) => ns.map((n) => n.dataset.word)")
        assert words == ["the", "man", "bit", "dog"]
        assert "sentence A" in button.inner_text()
        assert page.problems == [], page.problems
    finally:
        context.close()


BARS = """(sel) => [...document.querySelectorAll(sel + ' rect.bar')].map((r) => ({
  width: r.getBoundingClientRect().width, value: Number(r.dataset.value), rounding: r.dataset.rounding === 'true',
  label: r.nextElementSibling.textContent }))"""


def test_claim_without_positions_the_change_drops_to_rounding_and_bars_are_linear(browser, server):
    """Chapter 13: "switch the scheme to none: the change drops to rounding level. Every other scheme
    tells the two sentences apart" -- drawn as a zero bar labelled rounding, on one linear axis."""
    from playwright.sync_api import expect

    context, page = new_page(browser, server, SIZES["desktop"])
    try:
        node = open_chapter(page, server, "big-picture")
        widths = {}
        for scheme in ("nope", "sinusoidal", "alibi", "rope"):
            renders = node.get_attribute("data-renders")
            page.locator("#big-scheme").select_option(scheme)
            expect(node).not_to_have_attribute("data-renders", renders, timeout=20_000)
            bars = page.evaluate(BARS, "#big-figure")
            assert len(bars) == 2
            widths[scheme] = bars
        for bar in widths["nope"]:
            assert bar["rounding"] and bar["width"] == 0 and "rounding" in bar["label"], bar
            assert bar["value"] < 1e-12
        # linear: every other scheme's bar is as long as its value says, on one axis for all schemes
        ratio = {s: [b["width"] / b["value"] for b in bars] for s, bars in widths.items() if s != "nope"}
        flat = [r for rs in ratio.values() for r in rs]
        assert max(flat) == pytest.approx(min(flat), rel=0.02), ratio
        assert all(not b["rounding"] and "rounding" not in b["label"] for s in ratio for b in widths[s])
        assert widths["sinusoidal"][0]["width"] > 50 * widths["alibi"][0]["width"]
        assert page.problems == [], page.problems
    finally:
        context.close()


def test_claim_turning_values_is_measured_on_a_linear_axis(browser, server):
    """Chapter 12: with q, k turned the last output does not change (rounding, drawn as zero); with v
    turned too it does."""
    context, page = new_page(browser, server, SIZES["phone"])
    try:
        open_chapter(page, server, "common-mistakes")
        page.wait_for_timeout(300)
        right, wrong = page.evaluate(BARS, "#mis-v")
        assert right["rounding"] and right["width"] == 0 and "rounding" in right["label"]
        assert not wrong["rounding"] and wrong["width"] > 100
        assert page.problems == [], page.problems
    finally:
        context.close()


def test_claim_alibi_is_taught_before_it_is_checked(browser, server):
    """The ALiBi chapter: slopes 1/2 ... 1/256 for 8 heads, head 0 adds −5 to a key 10 seats back, and
    at 64 seats the steep head keeps its attention near while the shallow one spreads it."""
    from playwright.sync_api import expect

    taught = IDS.index("alibi-penalty")
    checked = next(i for i, c in enumerate(CHAPTERS) if "alibi-head0" in c.checks)
    assert taught <= checked
    context, page = new_page(browser, server, SIZES["phone"])
    try:
        node = open_chapter(page, server, "alibi-penalty")
        expect(page.locator("#alibi-table tbody tr")).to_have_count(8)
        slopes = page.eval_on_selector_all(
            "#alibi-table tbody tr td:nth-child(2)", "(ns) => ns.map((n) => n.textContent)"
        )
        assert slopes == [f"1/{2**k}" for k in range(1, 9)]
        assert page.locator("#alibi-table tr[data-head='0'] td.bias").inner_text() == "−5.0000"
        assert page.locator("#alibi-chart svg").count() == 1 and page.locator("#alibi-weights svg").count() == 1
        # the check comes after the figure in the chapter
        assert page.evaluate(
            """() => { const f = document.getElementById('alibi-chart'), c = document.getElementById('lq-alibi-head0');
              return !!c && !!(f.compareDocumentPosition(c) & Node.DOCUMENT_POSITION_FOLLOWING); }"""
        )
        set_slider(page, node, "#alibi-distance", 64)
        near = [
            float(t)
            for t in page.eval_on_selector_all(
                "#alibi-table tbody tr td:nth-child(4)", "(ns) => ns.map((n) => n.textContent)"
            )
        ]
        far = [
            float(t)
            for t in page.eval_on_selector_all(
                "#alibi-table tbody tr td:nth-child(5)", "(ns) => ns.map((n) => n.textContent)"
            )
        ]
        assert near[0] > 0.35 and far[0] < 1e-3  # steep: attention stays on the nearest words
        assert far[-1] > 0.4 * near[-1]  # shallow: spread out
        assert page.problems == [], page.problems
    finally:
        context.close()


def test_claim_contents_come_from_the_manifest_and_checks_are_in_reading_order(browser, server):
    """The table of contents lists every chapter of the manifest with its number, none clipped, and the
    review chapter lists the checks in the order the chapters show them."""
    from playwright.sync_api import expect

    context, page = new_page(browser, server, SIZES["desktop"])
    try:
        node = open_chapter(page, server, "knowledge-checks")
        links = page.locator("#toc-list a")
        expect(links).to_have_count(len(IDS))
        for i, chapter in enumerate(CHAPTERS, start=1):
            link = links.nth(i - 1)
            assert link.get_attribute("href") == f"#{chapter.id}"
            assert link.inner_text().startswith(f"{i}. "), link.inner_text()
            assert chapter.title in link.inner_text()
        clipped = page.evaluate(
            """() => { const toc = document.querySelector('nav.toc').getBoundingClientRect();
              return [...document.querySelectorAll('#toc-list .toc-num')].filter((n) => {
                const b = n.getBoundingClientRect(); return b.left < toc.left - 0.5 || b.right > toc.right + 0.5; })
                .map((n) => n.textContent); }"""
        )
        assert clipped == []
        expect(node.locator(".kicker")).to_have_text(re.compile(rf"^Chapter {IDS.index('knowledge-checks') + 1} · "))
        expect(page.locator("#lq-index li")).not_to_have_count(0)
        listed = page.eval_on_selector_all("#lq-index li", "(ns) => ns.map((n) => n.dataset.check)")
        reading = [check for chapter in CHAPTERS for check in chapter.checks]
        assert listed == reading
        assert page.problems == [], page.problems
    finally:
        context.close()


def test_claim_pairs_past_training_are_defined_and_point_the_right_way(browser, server):
    """Chapter 8: plain RoPE puts every partial-turn pair past training, linear and YaRN none, NTK-aware
    most of the slow pairs; only a zero gets a tick."""
    from posenc.explorer.lesson import stretching

    context, page = new_page(browser, server, SIZES["phone"])
    try:
        node = open_chapter(page, server, "stretching-rope")
        assert "past training" in node.locator("#def-past-training").inner_text()
        set_slider(page, node, "#str-factor", 4)
        expected = {m["method"]: m["pairs_past_training"] for m in stretching(4.0, 8192, 128)["methods"]}
        shown = {}
        for method in expected:
            row = page.locator(f"#str-table tr[data-method='{method}']")
            shown[method] = int(row.get_attribute("data-past"))
            cell = row.locator("td").last.inner_text()
            assert cell.startswith("✓") == (shown[method] == 0), (method, cell)
        assert shown == expected
        assert shown["linear"] == 0 == shown["yarn"] and shown["ntk"] > 0 and shown["rope"] > shown["ntk"]
        assert page.problems == [], page.problems
    finally:
        context.close()


def test_claim_the_demo_reproduces_the_seed_and_keeps_its_indentation_on_a_phone(browser, server):
    """Chapter 10: the from-scratch demo prints the seed's 0.65457 at seats 1/3 and after a move of
    10,000 seats; on a phone the code scrolls sideways instead of wrapping, so indentation survives."""
    from playwright.sync_api import expect

    context, page = new_page(browser, server, SIZES["phone"])
    try:
        node = open_chapter(page, server, "pytorch-demo")
        output = page.locator("#demo-output")
        expect(output).to_contain_text("score, seats 1 and 3: 0.65457")
        set_slider(page, node, "#demo-shift", 10000)
        expect(output).to_contain_text("score, seats 10001 and 10003: 0.65457")
        expect(output).to_contain_text("posenc, seats 10001 and 10003: 0.65457")
        layout = page.evaluate(
            """() => { const pre = document.getElementById('demo-code'), s = getComputedStyle(pre);
              const lines = pre.textContent.split(String.fromCharCode(10)).length;
              const lineH = parseFloat(s.lineHeight) || parseFloat(s.fontSize) * 1.2;
              const pad = parseFloat(s.paddingTop) + parseFloat(s.paddingBottom);
              return { lines, rows: (pre.scrollHeight - pad) / lineH, scrolls: pre.scrollWidth > pre.clientWidth,
                whiteSpace: s.whiteSpace, page: document.documentElement.scrollWidth }; }"""
        )
        assert layout["whiteSpace"] == "pre" and layout["scrolls"], layout
        assert layout["rows"] == pytest.approx(layout["lines"], abs=1.5), layout  # one row per line: nothing wrapped
        assert layout["page"] <= SIZES["phone"][0]
        assert page.problems == [], page.problems
    finally:
        context.close()


def test_claim_code_in_prose_and_tables_breaks_only_between_words(browser, server):
    """The comparison table's ``nn.Embedding(L_max, d)`` never breaks inside the name."""
    context, page = new_page(browser, server, SIZES["desktop"])
    try:
        for size in ("desktop", "phone"):
            page.set_viewport_size(dict(zip(("width", "height"), SIZES[size])))
            open_chapter(page, server, "comparison")
            page.wait_for_timeout(200)
            broken = page.evaluate(
                """() => [...document.querySelectorAll('#ch-comparison code')].filter((c) => {
                  const range = document.createRange(), text = c.firstChild;
                  if (!text || text.nodeType !== 3) return false;
                  const word = text.textContent.indexOf('Embedding');
                  if (word < 0) return false;
                  range.setStart(text, word); range.setEnd(text, word + 'Embedding'.length);
                  return range.getClientRects().length > 1; }).map((c) => c.textContent)"""
            )
            assert broken == [], (size, broken)
        assert page.problems == [], page.problems
    finally:
        context.close()


def test_claim_the_opening_demo_shows_a_shuffle_and_ropes_small_differences(browser, server):
    """Chapter 1: the shuffled row differs from the sentence on first load; with none the difference
    strip is white (rounding); with RoPE it is coloured on a scale of its own, and the page says why
    RoPE's changes are small (an untrained block)."""
    from playwright.sync_api import expect

    context, page = new_page(browser, server, SIZES["phone"])
    try:
        node = open_chapter(page, server, "bag-of-tiles")
        words = page.locator("#bag-text").input_value().split()
        shown = page.locator("#bag-figure svg text").first.text_content()
        assert shown.startswith("shuffled: ") and shown.split(": ")[1].split() != words
        assert sorted(shown.split(": ")[1].split()) == sorted(words)
        fills = "(ns) => ns.map((n) => n.getAttribute('fill'))"
        assert set(page.eval_on_selector_all("#bag-figure rect.delta", fills)) == {"#ffffff"}
        renders = node.get_attribute("data-renders")
        page.locator("#bag-scheme").select_option("rope")
        expect(node).not_to_have_attribute("data-renders", renders, timeout=20_000)
        written = page.eval_on_selector_all("#bag-figure rect.written", fills)
        shuffled = page.eval_on_selector_all("#bag-figure rect.shuffled", fills)
        delta = page.eval_on_selector_all("#bag-figure rect.delta", fills)
        white = {"rgb(255,255,255)", "#ffffff"}
        assert sum(f not in white for f in delta) > len(delta) // 2  # the difference strip is coloured
        assert written != shuffled
        spans = page.eval_on_selector_all("#bag-figure .sign-legend", "(ns) => ns.map((n) => Number(n.dataset.span))")
        assert len(spans) == 2 and 0 < spans[1] < 0.2 * spans[0], spans  # the difference has its own, finer scale
        assert "untrained" in node.locator("#bag-why-small").inner_text()
        assert page.problems == [], page.problems
    finally:
        context.close()


def test_claim_one_colour_per_sign_in_every_chapter(browser, server):
    """A value below zero is drawn in the sign map's blue and one above it in its red, in chapter 1's
    strips and chapter 2's bars alike, each figure with the sign legend."""
    from posenc.explorer.palette import SIGN_COLOURS

    context, page = new_page(browser, server, SIZES["desktop"])
    try:
        open_chapter(page, server, "word-plus-position")
        page.wait_for_timeout(200)
        bars = page.eval_on_selector_all(
            "#input-figure rect.bar",
            "(ns) => ns.map((n) => n.getAttribute('fill'))",
        )
        fills = set(bars)
        assert fills <= set(SIGN_COLOURS.values()) and len(fills) == 2
        assert page.locator("#input-figure .sign-legend").count() == 1
        open_chapter(page, server, "bag-of-tiles")
        page.wait_for_timeout(200)
        assert page.locator("#bag-figure .sign-legend").count() == 2
        extremes = page.evaluate(
            """() => { const cells = [...document.querySelectorAll('#bag-figure rect.written')];
              return cells.map((c) => c.getAttribute('fill')); }"""
        )
        blue, red = SIGN_COLOURS["negative"], SIGN_COLOURS["positive"]
        to_rgb = lambda h: f"rgb({int(h[1:3], 16)},{int(h[3:5], 16)},{int(h[5:7], 16)})"  # noqa: E731
        assert to_rgb(blue) in extremes or to_rgb(red) in extremes  # the largest |value| reaches an end of the map
        assert page.problems == [], page.problems
    finally:
        context.close()


def test_claim_rule_one_is_about_growth_with_the_seat(browser, server):
    """Chapters 2-4: at GPT-2's scale the position vector is about 30 times the word at every seat; the
    sine code's pull on "dog" and "man" stays in a band at every seat, while the raw seat drives it to 1."""
    context, page = new_page(browser, server, SIZES["desktop"])
    try:
        node = open_chapter(page, server, "word-plus-position")
        ratios = []
        for seat in (3, 60):
            renders = node.get_attribute("data-renders")
            page.locator("#input-std").select_option("0.02")
            page.locator("#input-seat").fill(str(seat))
            from playwright.sync_api import expect

            expect(node).not_to_have_attribute("data-renders", renders, timeout=20_000)
            page.wait_for_timeout(300)
            text = page.locator("#input-numbers").inner_text()
            ratios.append(float(re.search(r"position / word = ([\d.]+)", text).group(1)))
        assert ratios[0] == ratios[1] and 20 < ratios[0] < 40  # the same at every seat
        node = open_chapter(page, server, "bad-ideas")
        set_slider(page, node, "#raw-seat", 2000)
        text = page.locator("#raw-numbers").inner_text()
        raw = float(re.search(r"with the raw seat ([\d.]+)", text).group(1))
        sine = float(re.search(r"with the sine code ([\d.]+)", text).group(1))
        low, high = (float(v) for v in re.search(r"stays between ([\d.]+) and ([\d.]+)", text).groups())
        assert raw > 0.999 and low <= sine <= high < 0.9
        assert "rule 1" in node.locator("#sine-pull").inner_text()
        assert page.problems == [], page.problems
    finally:
        context.close()
