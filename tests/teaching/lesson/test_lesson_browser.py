"""The guided lesson as a whole in a real headless Chromium (Playwright) against a real ``posenc explore``
server.

At a desktop size (1440x900) and a phone size (390x844) every chapter is opened by its URL hash and
must render, fit the width of the screen, keep chart text at 11 px or more, give its figure a text
alternative, change its figure when its main control moves, and pass axe-core with no serious or
critical violation. Keyboard-only use must reach every control, and the arrow keys turn the pages; the
contents come from the manifest, a broken chapter script breaks only its chapter, and the knowledge
checks keep one score in the lesson and the workbench. Screenshots of each chapter at both sizes land
in ``$POSENC_SCREENSHOT_DIR`` (default: a folder under pytest's temporary directory), never in the
repository. The claims of each chapter are tested in ``test_lesson_*_browser.py`` by chapter.

The browser is the system Chromium, or ``$POSENC_CHROMIUM`` (Playwright never downloads one). Without
it these tests skip, unless ``POSENC_REQUIRE_BROWSER=1`` (set in CI) turns the skip into a failure.
"""

from __future__ import annotations

import re

import pytest
from browser_support import SIZES, axe_serious, new_page, open_chapter, settled, watched_page

from posenc.teaching.lesson.manifest import CHAPTERS

pytestmark = pytest.mark.slow

IDS = [c.id for c in CHAPTERS]


def settled_box(page, node, selector):
    """The bounding box of ``selector`` once every figure of the chapter ``node`` has drawn (a redraw
    replaces the node)."""
    settled(node)
    box = page.locator(selector).bounding_box()
    assert box is not None, selector
    return box


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


# Chart labels that run into each other ("6,292,48012,584,960" on a phone): every text of a line chart (its
# tick labels, axis titles and marker labels) and the tick labels (text.tick) of every other figure.
TICKS_OVERLAP = """(id) => {
  const ch = document.getElementById('ch-' + id), hit = [];
  for (const s of ch.querySelectorAll('svg')) {
    const sel = s.classList.contains('chart') ? 'text' : 'text.tick';
    const boxes = [...s.querySelectorAll(sel)].filter((t) => t.textContent.trim())
      .map((t) => [t.textContent, t.getBoundingClientRect()]).filter(([, b]) => b.width > 0);
    boxes.forEach(([ta, a], i) => boxes.slice(i + 1).forEach(([tb, b]) => {
      if (a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5)
        hit.push(ta + ' / ' + tb);
    }));
  }
  return hit;
}"""


# Text cut off at a figure's edge (chapter 3's ruler once started its first label at x = −9, so "0.0000"
# lost its leading 0): every text of every SVG, as drawn, lies inside that SVG's box.
TEXT_OUTSIDE = """(id) => {
  const out = [];
  for (const s of document.getElementById('ch-' + id).querySelectorAll('svg')) {
    const box = s.getBoundingClientRect();
    if (!box.width) continue;
    for (const t of s.querySelectorAll('text')) {
      const b = t.getBoundingClientRect();
      if (!t.textContent.trim() || !b.width) continue;
      if (b.left < box.left - 0.5 || b.right > box.right + 0.5 || b.top < box.top - 0.5 || b.bottom > box.bottom + 0.5)
        out.push(`${t.textContent.trim()} (${(b.left - box.left).toFixed(0)}..${(b.right - box.left).toFixed(0)}`
          + ` of ${box.width.toFixed(0)})`);
    }
  }
  return out;
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


def too_wide(page, label: str) -> list[str]:
    """A failure line if the page is wider than the window (it would scroll sideways)."""
    scroll = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    return [f"{label}: page {scroll[0]} px wide in a {scroll[1]} px window"] if scroll[0] > scroll[1] else []


def text_cut_off(page, chapter: str, label: str) -> list[str]:
    """A failure line if text of ``chapter``'s figures runs past their edges (the first five pieces)."""
    cut = page.evaluate(TEXT_OUTSIDE, chapter)
    return [f"{label}: text cut off at its figure's edge: {cut[:5]}"] if cut else []


@pytest.mark.parametrize("size", list(SIZES))
def test_every_chapter_renders_fits_reacts_and_passes_axe(browser, server, shots, size):
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import expect

    width, height = SIZES[size]
    context, page = new_page(browser, server, SIZES[size])
    failures = []
    try:
        for number, chapter in enumerate(IDS, start=1):
            node = open_chapter(page, server, chapter)
            expect(page.locator("#progress-text")).to_contain_text(f"Chapter {number} of {len(IDS)}")
            failures += too_wide(page, chapter)
            small = page.evaluate(SMALL_TEXT, chapter)
            if small:
                failures.append(f"{chapter}: chart text under 11 px: {small[:5]}")
            crowded = page.evaluate(TICKS_OVERLAP, chapter)
            if crowded:
                failures.append(f"{chapter}: axis labels run into each other: {crowded}")
            # a chapter with two figures counts a render when the first arrives: wait for the others' text
            try:
                page.wait_for_function(f"({TEXT_ALTERNATIVES})('{chapter}').length === 0", timeout=10_000)
            except PlaywrightTimeout:
                pass  # reported below, with what is missing
            failures += text_cut_off(page, chapter, chapter)
            missing = page.evaluate(TEXT_ALTERNATIVES, chapter)
            if missing:
                failures.append(f"{chapter}: figures without a text alternative: {missing}")
            page.screenshot(path=str(shots / f"lesson-{number:02d}-{chapter}-{width}x{height}.png"), full_page=True)
            violations = axe_serious(page, f"#ch-{chapter}")
            if violations:
                failures.append(f"{chapter}: axe: {violations}")

            before, renders = page.evaluate(FIGURE_STATE, chapter), node.get_attribute("data-renders")
            moved = move_primary_control(page, chapter)
            expect(node).not_to_have_attribute("data-renders", renders, timeout=20_000)
            expect(node.locator(".error").first).to_be_hidden()
            if page.evaluate(FIGURE_STATE, chapter) == before:
                failures.append(f"{chapter}: the figure did not change after {moved}")
            failures += too_wide(page, f"{chapter} after {moved}")
            failures += text_cut_off(page, chapter, f"{chapter} after {moved}")
        assert not failures, "\n".join(failures)
        assert page.problems == [], page.problems
    finally:
        context.close()


# Every figure of a chapter: its drawn width (the SVG's own units), its width on screen, its holder's
# content width, and the content width of its panel: the lesson figure (.lesson-fig) around a figure
# box, or the card that is the holder itself (a dial, an attention map, the rotation plane's box: the
# figures with a natural size).
LESSON_FIGURE_WIDTHS = """(id) => {
  const content = (n) => { const s = getComputedStyle(n);
    return n.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight); };
  const out = [];
  for (const n of document.getElementById('ch-' + id).querySelectorAll('svg')) {
    // a legend's swatch (a stretch of its series' line) is no figure
    if (n.parentElement.closest('svg') || n.matches('.legend svg') || !n.getBoundingClientRect().width) continue;
    const holder = n.parentElement, boxed = holder.matches('.fig-box:not(.plane-box)');
    const panel = boxed ? holder.closest('.lesson-fig') : holder;
    out.push({ holder: holder.id || holder.className, boxed, drawn: n.viewBox.baseVal.width,
      shown: n.getBoundingClientRect().width, holderWidth: content(holder), panelWidth: content(panel) });
  }
  return out;
}"""


def lesson_figure_widths(page, chapter, redrawn=False):
    """The widths of every figure of ``chapter`` once every figure has drawn its answer (the chapter's
    data-pending is 0) and every figure box holds its drawing. ``redrawn``: wait until each figure is
    drawn at its holder's width (a redraw after a resize comes 150 ms after the window stops changing)."""
    drawn = f"({LESSON_FIGURE_WIDTHS})('{chapter}').every((f) => Math.abs(f.drawn - f.holderWidth) <= 1)"
    page.wait_for_function(
        f"""() => [...document.querySelectorAll('#ch-{chapter} .fig-box')].every((b) => b.querySelector('svg'))
        && {drawn if redrawn else "true"}""",
        timeout=20_000,
    )
    settled(page.locator(f"#ch-{chapter}"))
    return page.evaluate(LESSON_FIGURE_WIDTHS, chapter)


def test_every_lesson_figure_is_drawn_at_its_panels_width(browser, server):
    """One sizing rule for the lesson as for the workbench (charts.js widthOf, no cap of a figure's own):
    at 1440 and at 390 px every figure of every chapter is drawn at its panel's content width, so it
    fills the panel and CSS never scales it (its text keeps its size); after the window changes width,
    the one resize mechanism (core.js onResize) redraws the figures at the panel's new width."""
    drawn_at, boxes = {}, {}
    for size in SIZES:
        with watched_page(browser, server, SIZES[size]) as page:
            for chapter in IDS:
                open_chapter(page, server, chapter)
                for f in lesson_figure_widths(page, chapter):
                    where = (size, chapter, f)
                    assert abs(f["drawn"] - f["shown"]) <= 1, where
                    assert abs(f["shown"] - f["holderWidth"]) <= 1, where
                    assert abs(f["holderWidth"] - f["panelWidth"]) <= 1, where
                    if f["boxed"]:
                        drawn_at.setdefault(size, set()).add(round(f["drawn"]))
                        boxes.setdefault(size, set()).add((chapter, f["holder"]))
    # the same figures at both sizes; a figure box fills the lesson's column: wide on a desktop, the
    # phone's width less the margins
    assert boxes["desktop"] == boxes["phone"] and len(boxes["desktop"]) >= 15, boxes
    assert min(drawn_at["desktop"]) > 800 and max(drawn_at["phone"]) < SIZES["phone"][0], drawn_at

    with watched_page(browser, server, SIZES["desktop"]) as page:
        for chapter in ("bag-of-tiles", "rope"):
            open_chapter(page, server, chapter)
            wide = {f["holder"]: f["drawn"] for f in lesson_figure_widths(page, chapter) if f["boxed"]}
            page.set_viewport_size(dict(zip(("width", "height"), SIZES["phone"])))
            narrow = {f["holder"]: f["drawn"] for f in lesson_figure_widths(page, chapter, redrawn=True) if f["boxed"]}
            assert wide.keys() == narrow.keys() and all(narrow[h] < wide[h] for h in wide), (chapter, wide, narrow)
            page.set_viewport_size(dict(zip(("width", "height"), SIZES["desktop"])))


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

    with watched_page(browser, server, SIZES["phone"]) as page:
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
        handle = settled_box(page, node, "#rot-plane .drag-handle")
        plane = settled_box(page, node, "#rot-plane svg")
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


def test_claim_contents_come_from_the_manifest_and_checks_are_in_reading_order(browser, server):
    """The table of contents lists every chapter of the manifest with its number, none clipped, and the
    review chapter lists the checks in the order the chapters show them."""
    from playwright.sync_api import expect

    with watched_page(browser, server, SIZES["desktop"]) as page:
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
        # every article, in the manifest's order, with its number, level and title from the manifest
        articles = page.eval_on_selector_all(
            "#lesson-main > article.chapter",
            "(ns) => ns.map((n) => [n.dataset.chapter, n.querySelector('.kicker').textContent,"
            " n.querySelector('h2').textContent])",
        )
        assert articles == [[c.id, f"Chapter {i} · {c.level}", c.title] for i, c in enumerate(CHAPTERS, start=1)]
        expect(page.locator("#lq-index li")).not_to_have_count(0)
        listed = page.eval_on_selector_all("#lq-index li", "(ns) => ns.map((n) => n.dataset.check)")
        reading = [check for chapter in CHAPTERS for check in chapter.checks]
        assert listed == reading
        # each entry is the check's question, not the first sentence of its prompt
        from posenc.teaching.explorer.quiz import BY_ID

        links = page.eval_on_selector_all("#lq-index li a", "(ns) => ns.map((n) => n.textContent)")
        assert links == [BY_ID[c].question for c in reading]
        assert "Seats 4 and 5 are neighbours." not in links


def test_a_chapter_whose_script_is_missing_or_throws_says_so_and_the_others_work(browser, server):
    """Each chapter's script is imported on its own: one that is missing (404), fails as it is evaluated,
    or throws in its setup leaves its chapter with an error naming the script, never a blank page, and
    every other chapter still renders and is listed."""
    from playwright.sync_api import expect

    broken = {
        "rope": None,  # not found
        "comparison": 'throw new Error("broken as it loads");',
        "pytorch-demo": 'export const markup = "<p>figures</p>";\n'
        'export function setup() { throw new Error("broken setup"); }',
    }
    modules = {c.id: c.module for c in CHAPTERS}
    context, page = new_page(browser, server, SIZES["desktop"])

    def serving(chapter):
        def serve(route):
            if broken[chapter] is None:
                return route.fulfill(status=404, body="not found")
            return route.fulfill(status=200, content_type="text/javascript", body=broken[chapter])

        return serve

    for chapter in broken:
        page.route(f"**/static/lesson/chapters/{modules[chapter]}.js", serving(chapter))
    try:
        page.goto(f"{server}#rope")
        error = page.locator("#ch-rope .error").first
        expect(error).to_be_visible()
        expect(error).to_contain_text("lesson/chapters/rope.js")
        expect(page.locator("#ch-rope h2")).to_have_text(next(c.title for c in CHAPTERS if c.id == "rope"))
        page.goto(f"{server}#comparison")
        expect(page.locator("#ch-comparison .error").first).to_contain_text("broken as it loads")
        page.goto(f"{server}#pytorch-demo")
        expect(page.locator("#ch-pytorch-demo .error").first).to_contain_text("broken setup")
        expect(page.locator("#ch-pytorch-demo .error").first).to_contain_text("lesson/chapters/pytorch_demo.js")
        expect(page.locator("#toc-list a")).to_have_count(len(IDS))
        for chapter in ("bag-of-tiles", "stretching-rope", "big-picture"):
            node = open_chapter(page, server, chapter)
            expect(node.locator(".fig-box svg").first).to_be_visible()
    finally:
        context.close()


# Words (runs of letters, digits and _) of every code element of a chapter that the layout splits over two lines.
CODE_BROKEN = """(id) => { const out = [], words = [];
  for (const c of document.querySelectorAll('#ch-' + id + ' code')) {
    const walk = document.createTreeWalker(c, NodeFilter.SHOW_TEXT);
    while (walk.nextNode()) {
      const node = walk.currentNode;
      for (const m of node.textContent.matchAll(/[A-Za-z0-9_]+/g)) {
        words.push(m[0]);
        const range = document.createRange();
        range.setStart(node, m.index); range.setEnd(node, m.index + m[0].length);
        if ([...range.getClientRects()].filter((b) => b.width > 0).length > 1) out.push(`${m[0]} in ${c.textContent}`);
      }
    }
  }
  return { words, out }; }"""


def test_claim_code_in_prose_and_tables_breaks_only_between_words(browser, server):
    """No word of code in any chapter (``nn.Embedding(L_max, d)`` in the comparison table, dotted names such
    as ``posenc.rope.layout.permute_for_interleaved`` in the text) breaks inside itself on a phone, where
    lines are shortest: a long name breaks after a dot."""
    with watched_page(browser, server, SIZES["phone"]) as page:
        broken, words = {}, set()
        for chapter in IDS:
            open_chapter(page, server, chapter)
            found = page.evaluate(CODE_BROKEN, chapter)
            words.update(found["words"])
            if found["out"]:
                broken[chapter] = found["out"]
        assert {"Embedding", "permute_for_interleaved", "past_training"} <= words  # the words once broken are checked
        assert broken == {}, broken


def test_claim_one_colour_per_sign_in_every_chapter(browser, server):
    """A value below zero is drawn in the sign map's blue and one above it in its red, in chapter 1's
    strips and chapter 2's bars alike, each figure with the sign legend."""
    from posenc.teaching.lesson.palette import SIGN_COLOURS

    with watched_page(browser, server, SIZES["desktop"]) as page:
        open_chapter(page, server, "word-plus-position")
        bars = page.eval_on_selector_all(
            "#input-figure rect.bar",
            "(ns) => ns.map((n) => n.getAttribute('fill'))",
        )
        fills = set(bars)
        assert fills <= set(SIGN_COLOURS.values()) and len(fills) == 2
        assert page.locator("#input-legend .sign-legend").count() == 1
        open_chapter(page, server, "bag-of-tiles")
        assert page.locator("#bag-figure .sign-legend").count() == 2
        extremes = page.evaluate(
            """() => { const cells = [...document.querySelectorAll('#bag-figure rect.written')];
              return cells.map((c) => c.getAttribute('fill')); }"""
        )
        blue, red = SIGN_COLOURS["negative"], SIGN_COLOURS["positive"]
        to_rgb = lambda h: f"rgb({int(h[1:3], 16)},{int(h[3:5], 16)},{int(h[5:7], 16)})"  # noqa: E731
        assert to_rgb(blue) in extremes or to_rgb(red) in extremes  # the largest |value| reaches an end of the map


CELL_OVERLAP = """(id) => { const hit = []; let cells = 0;
  for (const table of document.querySelectorAll('#ch-' + id + ' table')) {
    const boxes = [...table.querySelectorAll('td, th, caption')].flatMap((cell, ci) => {
      const walk = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT), out = [];
      cells += 1;
      while (walk.nextNode()) {
        if (!walk.currentNode.textContent.trim()) continue;
        const range = document.createRange();
        range.selectNodeContents(walk.currentNode);
        for (const b of range.getClientRects()) if (b.width > 0) out.push([ci, walk.currentNode.textContent.trim(), b]);
      }
      return out; });
    boxes.forEach(([ca, ta, a], i) => boxes.slice(i + 1).forEach(([cb, tb, b]) => {
      if (ca !== cb && a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1)
        hit.push(`${ta.slice(0, 30)} / ${tb.slice(0, 30)}`);
    }));
  }
  return { cells, hit }; }"""


def test_no_table_cell_prints_over_another_on_a_phone(browser, server):
    """Every table of every chapter at 390x844 (the wavelengths table once printed its cells over each other):
    no two cells' text boxes overlap."""

    with watched_page(browser, server, SIZES["phone"]) as page:
        crowded, cells = {}, 0
        for chapter in IDS:
            open_chapter(page, server, chapter)  # waits until its figures have filled its tables
            found = page.evaluate(CELL_OVERLAP, chapter)
            cells += found["cells"]
            if found["hit"]:
                crowded[chapter] = found["hit"][:5]
        assert cells > 100  # the tables were there to check
        assert crowded == {}, crowded


def test_the_precision_view_names_its_head_and_agrees_with_the_check_at_the_checks_head(browser, server):
    from playwright.sync_api import expect

    from posenc.teaching.lesson.chapters import knowledge_checks as kc

    _, evidence = kc._precision()
    with watched_page(browser, server, SIZES["desktop"]) as page:
        page.goto(f"{server}#precision")
        view = page.locator("#view-precision")
        expect(view).not_to_have_attribute("data-renders", "0", timeout=20_000)
        head = page.locator("#g-head-dim").input_value()
        expect(page.locator("#pr-head")).to_have_text(f"{head}-wide head with base 10,000")
        renders = view.get_attribute("data-renders")
        page.locator("#g-head-dim").select_option(str(kc.CHECK_HEAD_DIM))
        expect(view).not_to_have_attribute("data-renders", renders, timeout=20_000)
        expect(page.locator("#pr-head")).to_have_text(f"{kc.CHECK_HEAD_DIM}-wide head with base 10,000")
        assert "1,000,000" in page.locator("#pr-readout").inner_text()
        shown = float(page.locator("#pr-fp32").get_attribute("data-value"))
        assert shown == pytest.approx(evidence["float32"], rel=1e-9)


def test_the_lesson_and_the_workbench_keep_one_check_score_across_a_reload(browser, server):
    import re

    from playwright.sync_api import expect

    from posenc.teaching.explorer.quiz import CHECKS

    total = len(CHECKS)
    with watched_page(browser, server, SIZES["desktop"]) as page:
        node = open_chapter(page, server, "bag-of-tiles")
        card = node.locator(".check-card").first
        card.locator(".choice").first.click()
        expect(card.locator(".feedback")).to_be_visible()
        first_right = card.locator(".feedback").get_attribute("data-correct") == "true"

        def scores():
            open_chapter(page, server, "knowledge-checks")
            lesson = page.locator("#lq-total").inner_text()
            page.goto(f"{server}#quiz")
            expect(page.locator("#quiz-list .quiz-card").first).to_be_visible(timeout=20_000)
            bench = page.locator("#quiz-score").inner_text()
            return [tuple(map(int, re.findall(r"\d+", text))) for text in (lesson, bench)]

        one = (1, total, int(first_right))
        assert scores() == [one, one]
        page.reload()
        assert scores() == [one, one]  # a reload keeps the score
        quiz = page.locator("#quiz-list .quiz-card").nth(total - 1)  # a check answered in the workbench this time
        quiz.locator(".choice").first.click()
        expect(quiz.locator(".feedback")).to_be_visible()
        second_right = quiz.locator(".feedback").get_attribute("data-correct") == "true"
        two = (2, total, int(first_right) + int(second_right))
        assert scores() == [two, two]


# Per entry of the opened table of contents: its text, and whether its number and its link lie whole inside the
# contents' box and the screen, and its text inside its link (nothing cut off at either side).
TOC_FITS = """() => { const toc = document.querySelector('nav.toc').getBoundingClientRect(), w = window.innerWidth;
  const inside = (b) => b.width > 0 && b.left >= Math.max(0, toc.left) - 0.5 && b.right <= Math.min(w, toc.right) + 0.5;
  return [...document.querySelectorAll('#toc-list a')].map((a) => [a.textContent,
    inside(a.querySelector('.toc-num').getBoundingClientRect()) && inside(a.getBoundingClientRect())
      && a.scrollWidth <= a.clientWidth + 1]); }"""


def test_claim_the_contents_fit_on_a_phone_once_opened(browser, server):
    """The table of contents on a phone: folded at first, and once opened every chapter is listed with its
    number, in the manifest's order, each number and link whole inside the contents and the screen."""
    from playwright.sync_api import expect

    with watched_page(browser, server, SIZES["phone"]) as page:
        open_chapter(page, server, "knowledge-checks")
        box = page.locator("#toc-box")
        expect(box).not_to_have_attribute("open", "")
        box.locator("summary").click()
        expect(box).to_have_attribute("open", "")
        links = page.locator("#toc-list a")
        expect(links).to_have_count(len(CHAPTERS))
        for i in range(len(CHAPTERS)):
            expect(links.nth(i)).to_be_visible()
        fits = page.evaluate(TOC_FITS)
        assert len(fits) == len(CHAPTERS)
        for i, ((shown, whole), chapter) in enumerate(zip(fits, CHAPTERS), start=1):
            assert shown.startswith(f"{i}. ") and chapter.title in shown, shown
            assert whole, shown
