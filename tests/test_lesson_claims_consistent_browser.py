"""Claim tests of the lesson in a real headless Chromium: one story across a chapter's figures, its tables
and the chapters around it. Expected values come from posenc (``posenc.lesson``) or a computation written
out here, never from numbers copied off the page. Helpers are those of ``test_lesson_browser``; these skip
without Chromium (or fail with ``POSENC_REQUIRE_BROWSER=1``).
"""

from __future__ import annotations

import math

import pytest
from browser_support import chromium_or_skip, explore_server, headless_chromium
from test_lesson_browser import SIZES, new_page, open_chapter, set_slider

pytestmark = pytest.mark.slow


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


def number(shown: str) -> float:
    return float(shown.replace("−", "-").replace(",", ""))


# -- chapter 7: the four ways score the dials' query and key ---------------------------------------------
FOUR_WAYS = """() => Object.fromEntries([...document.querySelectorAll('#pairs-table tbody tr')].map((tr) =>
  [tr.dataset.way, tr.querySelector('td').textContent]))"""


def test_claim_one_score_four_ways_is_the_score_under_the_dials(browser, server):
    """Chapter 7: "one query and key (seats m + move and n + move of the dials above) scored four ways by
    posenc" -- each of the four scores is the score printed under the dials, at every setting of the dials'
    sliders, and the table's caption names the dials' seats."""
    from playwright.sync_api import expect

    from posenc.lesson.chapters.rope import rope_clock

    context, page = new_page(browser, server, SIZES["desktop"])
    try:
        node = open_chapter(page, server, "rope")
        caption = node.locator("[data-prose='pairs-caption']").inner_text()
        assert "seats m + move and n + move of the dials above" in caption
        for m, n, shift in ((3, 1, 100), (5, 30, 250), (40, 0, 0)):
            set_slider(page, node, "#rope-m", m)
            set_slider(page, node, "#rope-n", n)
            set_slider(page, node, "#rope-shift", shift)
            expect(page.locator("#pairs-table caption")).to_have_text(
                f"One query and key at seats {m + shift} and {n + shift}, scored four ways"
            )
            under_dials = page.locator("#rope-score").inner_text()
            expected = rope_clock(8, m, n, shift)["score_shifted"]
            assert number(under_dials) == pytest.approx(expected, abs=5e-8)
            ways = page.evaluate(FOUR_WAYS)
            assert set(ways) == {"half", "interleaved", "complex", "gap"}
            for way, shown in ways.items():
                assert number(shown) == pytest.approx(expected, abs=5e-10), (way, shown)
                assert f"{number(shown):.7f}" == f"{number(under_dials):.7f}", (way, shown, under_dials)
        assert page.problems == [], page.problems
    finally:
        context.close()


# -- chapter 10: what the live column measures, and chapter 8's rule -----------------------------------------
LIVE = """() => Object.fromEntries([...document.querySelectorAll('#cmp-table tbody tr')].map((tr) =>
  [tr.dataset.scheme, [tr.querySelector('.live-reads').textContent, tr.querySelector('.live-reads').className]]))"""
LIVE_HEAD = "() => document.querySelector('#cmp-table thead tr').lastElementChild.textContent"


def test_claim_placing_4096_tokens_is_not_reading_them_and_rope_agrees_with_chapter_eight(browser, server):
    """Chapter 10: the live column says what it measures: at or under the 512 tokens trained every scheme is
    within training; past it the learned table refuses, and the others place the tokens without an error but
    meet what training never showed them -- for plain RoPE the pairs chapter 8 marks past training (its one
    rule, posenc.lesson.stretching.past_training). No scheme but those within training gets a tick."""
    from posenc.lesson.chapters.comparison import TRAINED
    from posenc.lesson.stretching import past_training
    from posenc.rope.tables import rope_inv_freq

    inv_freq = rope_inv_freq(8, 10000.0)  # the comparison's RoPE head: width 32, 4 heads
    context, page = new_page(browser, server, SIZES["desktop"])
    try:
        node = open_chapter(page, server, "comparison")
        intro = node.locator("[data-prose='intro']").inner_text()
        assert "can you read a longer text" not in intro
        assert "Placing a position without an error is not reading the text well" in intro
        for length in (512, 576, 4096):
            set_slider(page, node, "#cmp-len", length)
            assert page.evaluate(LIVE_HEAD) == f"at {length} tokens (trained on {TRAINED})"
            cells = page.evaluate(LIVE)
            assert set(cells) == {"sinusoidal", "learned", "rope", "alibi", "nope"}
            ticked = {s for s, (text, _) in cells.items() if text.startswith("✓")}
            passed = {s for s, (_, css) in cells.items() if "pass" in css.split()}
            assert ticked == passed
            if length <= TRAINED:
                assert ticked == set(cells)
                continue
            assert ticked == set(), cells  # placing without an error is not reading well
            assert cells["learned"][0].startswith("✗ refused: position 512 is outside the learned position table")
            past = int(past_training(inv_freq, inv_freq, TRAINED, length).sum())
            assert past == 2
            assert cells["rope"][0] == f"⚠ placed, but {past} of its 4 pairs turn past training (chapter 8)"
            for scheme in ("sinusoidal", "alibi", "nope"):
                assert cells[scheme][0].startswith("⚠") and f"{TRAINED:,}" in cells[scheme][0], cells[scheme]
        assert page.problems == [], page.problems
    finally:
        context.close()


# -- chapter 7's Measured tables: the gap is m − n, angles in degrees with a true minus ------------------------
MEASURED_TABLES = """() => [...document.querySelectorAll('#ch-rope [data-prose="measured"] table')].map((t) =>
  [t.caption.textContent, [...t.rows].map((tr) => [...tr.cells].map((c) => c.textContent))])"""


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_claim_the_measured_gap_is_query_seat_minus_key_seat_and_angles_are_in_degrees(browser, server, size):
    """Chapter 7, "Measured": the gap column is m − n, the query's seat minus the key's ("the gap is m − n
    everywhere in posenc"), printed with the page's minus sign; the who-bit-whom table writes its angles
    as 30° and its turns as +30° and −30°, as the dials' readout does."""
    from playwright.sync_api import expect

    context, page = new_page(browser, server, SIZES[size])
    try:
        open_chapter(page, server, "rope")
        tables = dict(page.evaluate(MEASURED_TABLES))
        (seats,) = [rows for caption, rows in tables.items() if caption.startswith("The score of one pair")]
        header, *rows = seats
        assert header[:3] == ["query seat m", "key seat n", "gap m − n"]
        for m, n, gap, *_ in rows:
            assert gap.startswith("−") and number(gap) == int(m) - int(n), (m, n, gap)
        (order,) = [rows for caption, rows in tables.items() if caption.startswith("Who bit whom")]
        assert [row[-1] for row in order[1:]] == ["+30°", "−30°"]
        assert all(cell.endswith("°") for row in order[1:] for cell in row[3:])
        assert "deg" not in " ".join(cell for row in order for cell in row)
        expect(page.locator("#order-turn")).to_have_text("+30°")
        assert page.problems == [], page.problems
    finally:
        context.close()


# -- chapter 7 on a phone: the control, the figure and its sentence in one view --------------------------------
SPAN = """(selectors) => { const boxes = selectors.map((s) => document.querySelector(s).getBoundingClientRect());
  return [Math.min(...boxes.map((b) => b.top)), Math.max(...boxes.map((b) => b.bottom))]; }"""
DIALS_VIEW = ["#ch-rope [data-prose='dials-try']", "#rope-shift", "#rope-dials", "#rope-score"]


@pytest.mark.parametrize("size", ["phone", "desktop"])
def test_claim_move_both_the_dials_and_the_score_fit_one_screen(browser, server, size):
    """Chapter 7's "drag move both by: every hand turns, yet the score under the dials stays the same": the
    sentence, the slider it names, the dials and the score fit in one viewport height, at 390×844 and at
    1440×900, so the reader sees every hand turn and the score hold while dragging; and they do so after
    the slider is moved."""
    width, height = SIZES[size]
    context, page = new_page(browser, server, SIZES[size])
    try:
        node = open_chapter(page, server, "rope")
        sentence = node.locator("[data-prose='dials-try']").inner_text()
        assert "move both by" in sentence and "the score under the dials stays the same" in sentence
        for shift in (100, 500):
            set_slider(page, node, "#rope-shift", shift)
            page.locator(DIALS_VIEW[0]).scroll_into_view_if_needed()
            page.evaluate("(s) => document.querySelector(s).scrollIntoView({block: 'start'})", DIALS_VIEW[0])
            top, bottom = page.evaluate(SPAN, DIALS_VIEW)
            assert bottom - top <= height, (size, shift, top, bottom)
            assert top >= -1 and bottom <= height, (size, shift, top, bottom)  # all of it on screen at once
            cards = page.eval_on_selector_all(
                "#rope-dials .dial-card svg", "(ns) => ns.map((n) => n.getBoundingClientRect().width)"
            )
            assert len(cards) == 8 and min(cards) >= 55, cards  # every clock drawn, none squeezed to nothing
            overflow = page.evaluate(
                "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
            assert overflow <= 0, overflow
        assert page.problems == [], page.problems
    finally:
        context.close()


# -- chapter 2: the legend shows the colours the bars are drawn in ------------------------------------------
def test_claim_chapter_twos_legend_is_the_two_colours_its_bars_are_drawn_in(browser, server):
    """Chapter 2's bars are coloured by their sign alone (their height is their size): the legend shows
    exactly the colours the bars use, one for each sign, and no colour scale the bars never take."""
    from posenc.lesson.palette import SIGN_COLOURS

    context, page = new_page(browser, server, SIZES["desktop"])
    try:
        node = open_chapter(page, server, "word-plus-position")
        set_slider(page, node, "#input-seat", 5)
        bars = page.eval_on_selector_all(
            "#input-figure rect.bar", "(ns) => ns.map((n) => [Number(n.dataset.value), n.getAttribute('fill')])"
        )
        assert {fill for v, fill in bars if v < 0} == {SIGN_COLOURS["negative"]}
        assert {fill for v, fill in bars if v > 0} == {SIGN_COLOURS["positive"]}
        legend = page.eval_on_selector_all(
            "#ch-word-plus-position .sign-legend .sign-swatch",
            "(ns) => ns.map((n) => [n.dataset.sign, getComputedStyle(n).backgroundColor])",
        )
        to_rgb = lambda h: f"rgb({int(h[1:3], 16)}, {int(h[3:5], 16)}, {int(h[5:7], 16)})"  # noqa: E731
        assert sorted(map(tuple, legend)) == sorted(
            [(s, to_rgb(c)) for s, c in SIGN_COLOURS.items() if s in ("negative", "positive")]
        )
        assert page.locator("#ch-word-plus-position .sign-legend rect").count() == 0  # no colour scale
        assert page.problems == [], page.problems
    finally:
        context.close()


# -- chapter 7: at a quarter turn the matrix prints the zeros its text states ---------------------------------
def test_claim_the_matrix_at_ninety_degrees_prints_zero_and_one(browser, server):
    """Chapter 7's 2×2 matrix: three seats of 30° is a quarter turn, the matrix [[0, −1], [1, 0]]; the page
    prints 0.000 and ±1.000, not the 6.1e-17 of a cosine computed from a rounded pi."""
    context, page = new_page(browser, server, SIZES["desktop"])
    try:
        node = open_chapter(page, server, "rope")
        set_slider(page, node, "#rot-seat", 3)
        cells = page.eval_on_selector_all("#rot-matrix table.matrix td", "(ns) => ns.map((n) => n.textContent)")
        assert cells[:2] == ["0.000", "−1.000"] and cells[6:8] == ["1.000", "0.000"], cells
        text = page.locator("#rot-matrix").inner_text()
        assert "e-" not in text and "e−" not in text, text
        assert "m·θ = 3 × 30° = 90.0°" in text
        assert page.problems == [], page.problems
    finally:
        context.close()


# -- chapter 6: one token is "1 token" -----------------------------------------------------------------------
def test_claim_one_token_is_written_in_the_singular(browser, server):
    from playwright.sync_api import expect

    context, page = new_page(browser, server, SIZES["desktop"])
    try:
        node = open_chapter(page, server, "learned-tables")
        set_slider(page, node, "#wall-tokens", 1)
        expect(page.locator("#wall-result")).to_contain_text("1 token: fine.")
        assert "1 tokens" not in node.inner_text()
        assert "1 token asked for" in page.locator("#wall-figure").inner_text()
        set_slider(page, node, "#wall-tokens", 513)
        expect(page.locator("#wall-result")).to_contain_text("513 tokens: posenc raised")
        assert page.problems == [], page.problems
    finally:
        context.close()


# -- chapter 9 at 16 heads: a legend, and one way of writing a slope -----------------------------------------
def test_claim_sixteen_alibi_heads_have_a_legend_and_slopes_written_alike(browser, server):
    from posenc.lesson.chapters.alibi_penalty import alibi_penalty

    context, page = new_page(browser, server, SIZES["phone"])
    try:
        node = open_chapter(page, server, "alibi-penalty")
        renders = node.get_attribute("data-renders")
        page.locator("#alibi-heads").select_option("16")
        from playwright.sync_api import expect

        expect(node).not_to_have_attribute("data-renders", renders, timeout=20_000)
        page.wait_for_timeout(200)
        expected = [r["slope_text"] for r in alibi_penalty(16, 10)["rows"]]
        items = page.eval_on_selector_all("#alibi-chart .legend-item", "(ns) => ns.map((n) => n.dataset.name)")
        assert items == [f"head {h}: slope {t}" for h, t in enumerate(expected)]
        shown = page.eval_on_selector_all(
            "#alibi-table tbody tr td:nth-of-type(1)", "(ns) => ns.map((n) => n.textContent)"
        )
        assert shown == expected and not any(t.startswith("1/") for t in shown)
        assert page.problems == [], page.problems
    finally:
        context.close()


# -- chapter 3: "N times longer" names the word it measures against -------------------------------------------
def test_claim_the_raw_seat_is_measured_against_the_word_the_bars_show(browser, server):
    """Chapter 3: the raw position vector's length is compared with "dog"'s word vector, the word of the
    bars beside it, and the page says so: ratio = seat·√16 / |dog|, recomputed here."""
    import math

    import torch

    from posenc.lesson.vectors import word_vector

    dog = float(torch.tanh(word_vector("dog", 16)).norm())
    context, page = new_page(browser, server, SIZES["desktop"])
    try:
        node = open_chapter(page, server, "bad-ideas")
        for seat in (500, 1000):
            set_slider(page, node, "#raw-seat", seat)
            (line,) = [t for t in page.locator("#raw-numbers li").all_inner_texts() if "times longer" in t]
            ratio = seat * math.sqrt(16) / dog
            assert f"(16 numbers, each {seat}) is {ratio:.1f} times longer than the word vector of “dog”" in line, line
            assert f"(length {dog:.2f})" in line
        assert page.problems == [], page.problems
    finally:
        context.close()


# -- chapter 1: an empty sentence says so in words, and the old figure is not passed off as the answer -------
def test_an_empty_sentence_is_refused_in_words_and_the_old_figure_is_dimmed(browser, server):
    from playwright.sync_api import expect

    context, page = new_page(browser, server, SIZES["phone"])
    try:
        node = open_chapter(page, server, "bag-of-tiles")
        error = node.locator(".error").first
        figure = page.locator("#bag-figure")
        opacity = "() => Number(getComputedStyle(document.querySelector('#bag-figure')).opacity)"
        assert page.evaluate(opacity) == 1
        page.locator("#bag-text").fill("   ")
        expect(error).to_be_visible(timeout=10_000)
        expect(error).to_have_text("text must contain at least one word, got '   '")
        assert "String should have" not in error.inner_text()
        expect(node).to_have_attribute("data-failed", "true")
        assert page.evaluate(opacity) < 0.5  # the figure left from the last sentence is not the answer
        page.locator("#bag-text").fill("dog bit man")
        expect(error).to_be_hidden(timeout=10_000)
        expect(node).not_to_have_attribute("data-failed", "true")
        expect(figure.locator("svg")).to_have_count(1)
        assert page.evaluate(opacity) == 1
        # the refused request (and the browser's console line about it) is the only problem
        expected = [p for p in page.problems if "HTTP 422" in p and "/api/lesson/bag" in p]
        others = [p for p in page.problems if p not in expected and "status of 422" not in p]
        assert len(expected) == 1 and others == [], page.problems
    finally:
        context.close()


# -- chapter 8: a log axis reads in one form and its title clears its ticks ---------------------------------
Y_AXIS = """() => { const texts = [...document.querySelectorAll('#str-chart svg text')];
  const title = texts.find((t) => t.classList.contains('axis-label') && t.getAttribute('transform'));
  const ticks = texts.filter((t) => !t.classList.contains('axis-label') && t.getAttribute('text-anchor') === 'end'
    && Number(t.getAttribute('x')) < 70);
  const box = (t) => { const b = t.getBoundingClientRect(); return [b.left, b.right, b.top, b.bottom]; };
  return { title: box(title), ticks: ticks.map((t) => [t.textContent, ...box(t)]) }; }"""


@pytest.mark.parametrize("size", ["phone", "desktop"])
def test_claim_the_wavelength_axis_is_written_one_way_and_its_title_clears_the_ticks(browser, server, size):
    """Chapter 8's log axis of wavelengths, at factor 8 and at factor 64: every tick label in one form (no
    "1e6" beside "100,000"), each reading back its decade, and none under the axis title."""
    import re

    context, page = new_page(browser, server, SIZES[size])
    try:
        node = open_chapter(page, server, "stretching-rope")
        for factor in (8, 64):
            set_slider(page, node, "#str-factor", factor)
            axis = page.evaluate(Y_AXIS)
            labels = [t[0] for t in axis["ticks"]]
            assert len(labels) >= 3, labels
            forms = {"exponent" if re.fullmatch(r"\d(\.\d+)?e−?\d+", t) else "plain" for t in labels}
            assert len(forms) == 1, labels
            values = [float(t.replace("−", "-").replace(",", "")) for t in labels]
            assert all(abs(math.log10(v) - round(math.log10(v))) < 1e-9 for v in values), labels  # decades
            left, right, top, bottom = axis["title"]
            for text, t_left, t_right, t_top, t_bottom in axis["ticks"]:
                apart = t_left >= right or t_right <= left or t_top >= bottom or t_bottom <= top
                assert apart, (factor, text, (t_left, t_right), (left, right))
        assert page.problems == [], page.problems
    finally:
        context.close()


# -- the workbench's precision view says which head its error is for, and at the check's head it agrees -------
def test_the_precision_view_names_its_head_and_agrees_with_the_check_at_the_checks_head(browser, server):
    from playwright.sync_api import expect

    from posenc.lesson.chapters import knowledge_checks as kc

    _, evidence = kc._precision()
    context, page = new_page(browser, server, SIZES["desktop"])
    try:
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
        assert page.problems == [], page.problems
    finally:
        context.close()


# -- one knowledge-check score, in the lesson and the workbench, kept across a reload --------------------------
def test_the_lesson_and_the_workbench_keep_one_check_score_across_a_reload(browser, server):
    import re

    from playwright.sync_api import expect

    from posenc.explorer.quiz import CHECKS

    total = len(CHECKS)
    context, page = new_page(browser, server, SIZES["desktop"])
    try:
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
        assert page.problems == [], page.problems
    finally:
        context.close()
